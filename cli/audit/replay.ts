/**
 * An agent's working view and built context as they were at an instant,
 * rebuilt from the log with the shared reducer (`evolve`) and the context
 * builder exactly as the working service calls it: `contextOfView(view,
 * { limit, order })` — with a focus, entries are ranked by their relevance
 * to it, a pure function of the view.
 *
 * The instant is a time (events whose envelope `at` is at or before it are
 * applied, in stream order) or a stream sequence (events up to it).
 */
import type { NatsConnection } from "@nats-io/transport-node"
import { HashMap } from "effect"
import type { MemoryEvent } from "../../contracts/events.ts"
import { agentEvents } from "../../contracts/subjects.ts"
import {
  type AgentView,
  baseBudget,
  entriesByTime,
  evolve,
  fullestText,
  viewSnapshot,
} from "../../domain/agent-view.ts"
import type { BuiltContext } from "../../domain/context-builder.ts"
import { trackLongTerm } from "../../domain/long-term-ids.ts"
import { scanLog } from "./log.ts"
import type { Progress } from "./progress.ts"

export interface Cut {
  /** Epoch milliseconds: apply events with `at` ≤ this. */
  readonly at?: number
  /** Apply events with stream sequence ≤ this. */
  readonly seq?: number
}

export interface Replayed {
  readonly agentId: string
  readonly cut: Cut
  readonly view: AgentView | undefined
  /** The ids of the agent's entries in long-term at the cut. */
  readonly longTerm: ReadonlySet<string>
  /** Events of the agent read from the log, and how many of them the cut admitted. */
  readonly read: number
  readonly applied: number
  readonly undecodable: number
}

/** Folds one agent's events in stream order, admitting those inside the cut. */
export const foldAgent = (
  agentId: string,
  events: Iterable<{ readonly seq: number; readonly event: MemoryEvent }>,
  cut: Cut,
): Omit<Replayed, "undecodable"> => {
  let view: AgentView | undefined
  const longTerm = new Set<string>()
  let read = 0
  let applied = 0
  for (const { seq, event } of events) {
    if (event.agentId !== agentId) continue
    read++
    if (cut.seq !== undefined && seq > cut.seq) break
    if (cut.at !== undefined && event.at > cut.at) continue
    trackLongTerm(longTerm, view, event, { seq })
    view = evolve(view, event, { seq })
    applied++
  }
  return { agentId, cut, view, longTerm, read, applied }
}

export const replayAgent = async (
  nc: NatsConnection,
  agentId: string,
  cut: Cut,
  progress?: Progress,
): Promise<Replayed> => {
  const events: Array<{ seq: number; event: MemoryEvent }> = []
  let undecodable = 0
  await scanLog(
    nc,
    {
      filter: agentEvents(agentId),
      ...(cut.seq !== undefined ? { untilSeq: cut.seq } : {}),
      ...(progress ? { progress } : {}),
    },
    (r) => {
      if (r.event) events.push({ seq: r.seq, event: r.event })
      else undecodable++
    },
  )
  return { ...foldAgent(agentId, events, cut), undecodable }
}

// ---------------------------------------------------------------------------
// Formatting

const iso = (ms: number) => new Date(ms).toISOString()

export const describeCut = (cut: Cut) =>
  [
    cut.at !== undefined ? `events stamped at or before ${iso(cut.at)}` : null,
    cut.seq !== undefined ? `stream sequence ≤ ${cut.seq}` : null,
  ]
    .filter((x) => x !== null)
    .join(" and ")

const preview = (text: string | null, width: number) => {
  const flat = (text ?? "").replace(/\s+/g, " ").trim()
  return flat.length > width ? `${flat.slice(0, width - 1)}…` : flat
}

export interface FormatOptions {
  /** How many entries to list, newest kept (default 50; Infinity for all). */
  readonly entries?: number
}

export const formatReplay = (
  replayed: Replayed,
  context: BuiltContext | undefined,
  options: FormatOptions = {},
): string => {
  const { view } = replayed
  const lines: string[] = []
  lines.push(
    `Agent ${replayed.agentId} as of ${describeCut(replayed.cut)}: ${replayed.applied} of ${replayed.read} events applied` +
      (replayed.undecodable > 0 ? ` (${replayed.undecodable} undecodable records skipped)` : ""),
  )
  if (view === undefined || context === undefined) {
    lines.push("The agent was not registered at that point.")
    return `${lines.join("\n")}\n`
  }
  const entries = entriesByTime(HashMap.values(view.entries))
  const byRung = [0, 0, 0]
  for (const e of entries) byRung[e.rung]! += 1
  lines.push(
    `Role ${view.config.role}, budget ${view.budgetInForce}${view.hyperfocus ? ` (hyperfocus; base ${baseBudget(view)})` : ""}, ` +
      `usage ${view.usage}/${view.budgetInForce} tokens; entries by rung: r0 ${byRung[0]}, r1 ${byRung[1]}, r2 ${byRung[2]}; ` +
      `${replayed.longTerm.size} in long-term; last event seq ${view.lastSeq} at ${iso(view.lastEventAt)}`,
  )
  lines.push(
    view.step
      ? `Open step ${view.step.stepId}${view.step.focus ? ` (focus ${JSON.stringify(view.step.focus)})` : ""}`
      : "No open step",
  )
  if (view.focus)
    lines.push(`Focus ${JSON.stringify(view.focus)}${view.taskKind ? ` (task kind ${view.taskKind})` : ""}`)
  const shown = Math.min(entries.length, options.entries ?? 50)
  lines.push(
    "",
    `Entries (${entries.length}, timestamp order${shown < entries.length ? `; the newest ${shown} shown, --entries all for every one` : ""}):`,
  )
  for (const e of entries.slice(entries.length - shown)) {
    const text = e.rung === 2 ? e.summary : e.content
    lines.push(
      `  ${e.id}  ${iso(e.timestamp)}  ${e.origin.padEnd(8)} rung ${e.rung}  ${String(e.tokens.raw).padStart(5)} tok  ` +
        `read ${e.referenceCount}  cited ${e.citationCount}  "${preview(text, 70)}"`,
    )
  }
  const cues = entriesByTime(HashMap.values(view.cues))
  if (cues.length > 0) {
    lines.push("", `Cues of the open step (${cues.length}):`)
    for (const c of cues)
      lines.push(`  ${c.id}  ${iso(c.timestamp)}  ${c.origin.padEnd(8)} "${preview(fullestText(c), 70)}"`)
  }
  lines.push(
    "",
    `Context: ${context.tokens}/${context.budget} tokens, ${context.items.length} entries served ` +
      `(${context.items.filter((i) => i.form === "raw").length} raw), ${context.omitted} left out`,
  )
  for (const line of context.text.split("\n")) if (line.length > 0) lines.push(`  │ ${line}`)
  return `${lines.join("\n")}\n`
}

export const replayJson = (replayed: Replayed, context: BuiltContext | undefined) => ({
  agentId: replayed.agentId,
  cut: {
    ...(replayed.cut.at !== undefined ? { at: iso(replayed.cut.at), atMillis: replayed.cut.at } : {}),
    ...(replayed.cut.seq !== undefined ? { seq: replayed.cut.seq } : {}),
  },
  read: replayed.read,
  applied: replayed.applied,
  undecodable: replayed.undecodable,
  view: replayed.view ? { ...viewSnapshot(replayed.view), longTerm: [...replayed.longTerm].sort() } : null,
  context: context ?? null,
})

/** Parses `--at`: epoch milliseconds, or an ISO 8601 time. */
export const parseInstant = (value: string): number => {
  if (/^\d+$/.test(value)) return Number(value)
  const ms = Date.parse(value)
  if (Number.isNaN(ms)) throw new Error(`--at '${value}' is neither epoch milliseconds nor an ISO 8601 time`)
  return ms
}
