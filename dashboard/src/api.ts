/** The dashboard's JSON API (services/dashboard/http.ts), read from the page's own origin. */
import type { AgentPage, AgentSummary, HistoryItem, TimelineItem } from "../../services/dashboard/read-model.ts"

export type {
  AgentPage,
  AgentSummary,
  EntryCard,
  HistoryItem,
  TimelineItem,
} from "../../services/dashboard/read-model.ts"

export type LiveItem = TimelineItem & { readonly agentId: string }

const get = async <T>(path: string): Promise<T> => {
  const res = await fetch(path, { headers: { accept: "application/json" } })
  if (!res.ok) throw new Error(`${path}: ${res.status} ${await res.text()}`)
  return (await res.json()) as T
}

const agentPath = (agentId: string) => `/api/agents/${encodeURIComponent(agentId)}`

export const fetchAgents = () => get<{ agents: AgentSummary[]; lastSeq: number }>("/api/agents")

/** The agent's page: live, or replayed to an instant (epoch ms of event time). */
export const fetchPage = (agentId: string, at: number | null) =>
  get<AgentPage>(at === null ? agentPath(agentId) : `${agentPath(agentId)}?at=${at}`)

export const fetchTimeline = (agentId: string) => get<{ items: TimelineItem[] }>(`${agentPath(agentId)}/timeline`)

export const fetchHistory = (agentId: string, entryId: string) =>
  get<{ entryId: string; items: HistoryItem[] }>(`${agentPath(agentId)}/entries/${encodeURIComponent(entryId)}/history`)

/** Every new event of the log, as it is stored. */
export const followEvents = (onItem: (item: LiveItem) => void): (() => void) => {
  const source = new EventSource("/api/events")
  source.onmessage = (message) => onItem(JSON.parse(message.data) as LiveItem)
  return () => source.close()
}
