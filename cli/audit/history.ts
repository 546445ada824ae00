/**
 * One entry's whole history, from the log: its own subject
 * (`wm.evt.<p>.<agent>.entry.<entry>`: recorded, rung changes, demotion, cues,
 * promotion) and the step events that mention it (`wm.evt.<p>.<agent>.step`:
 * the recalls that brought it back as a cue, the reads that served it, the
 * references to it, the step's cue drops),
 * merged in stream order.
 */
import type { NatsConnection } from "@nats-io/transport-node"
import type { MemoryEvent } from "../../contracts/events.ts"
import type { FadeScore, Producer } from "../../contracts/fade.ts"
import { agentIdOfEventSubject, agentStepSubject, entryOfAnyAgent, entrySubject } from "../../contracts/subjects.ts"
import { scanLog, subjectsMatching } from "./log.ts"
import type { Progress } from "./progress.ts"

export interface HistoryItem {
  readonly seq: number
  readonly subject: string
  readonly event: MemoryEvent
}

export class HistoryError extends Error {
  override readonly name = "HistoryError"
}

/** The agents that have events on this entry id's subject. */
export const agentsOfEntry = async (nc: NatsConnection, entryId: string): Promise<string[]> => {
  const subjects = await subjectsMatching(nc, entryOfAnyAgent(entryId))
  return Object.keys(subjects).map(agentIdOfEventSubject).sort()
}

/** Does a step event concern this entry? */
export const mentions = (event: MemoryEvent, entryId: string): boolean => {
  switch (event._tag) {
    case "EntriesRead":
      return event.served.some((s) => s.entryId === entryId)
    case "EntriesReferenced":
    case "CuesDropped":
      return event.entryIds.includes(entryId)
    case "CuesRehydrated":
      return event.cues.some((c) => c.entryId === entryId)
    default:
      return false
  }
}

export const collectHistory = async (
  nc: NatsConnection,
  entryId: string,
  agentId: string | undefined,
  progress?: (label: string) => Progress,
): Promise<{ agentId: string; items: HistoryItem[] }> => {
  let agent = agentId
  if (agent === undefined) {
    const agents = await agentsOfEntry(nc, entryId)
    if (agents.length === 0) throw new HistoryError(`no events for entry '${entryId}' in the log`)
    if (agents.length > 1) {
      throw new HistoryError(
        `entry id '${entryId}' is used by several agents (${agents.join(", ")}); name one with --agent`,
      )
    }
    agent = agents[0]!
  }
  const items: HistoryItem[] = []
  await scanLog(
    nc,
    { filter: entrySubject(agent, entryId), ...(progress ? { progress: progress("entry events") } : {}) },
    (r) => {
      if (r.event) items.push({ seq: r.seq, subject: r.subject, event: r.event })
    },
  )
  if (items.length === 0) throw new HistoryError(`no events for entry '${entryId}' of agent '${agent}' in the log`)
  // Reads and references come after the entry's first event: scan the step subject from there.
  await scanLog(
    nc,
    {
      filter: agentStepSubject(agent),
      fromSeq: items[0]!.seq,
      ...(progress ? { progress: progress("step events") } : {}),
    },
    (r) => {
      if (r.event && mentions(r.event, entryId)) items.push({ seq: r.seq, subject: r.subject, event: r.event })
    },
  )
  items.sort((a, b) => a.seq - b.seq)
  return { agentId: agent, items }
}

// ---------------------------------------------------------------------------
// Formatting

const iso = (ms: number) => new Date(ms).toISOString()
const num = (x: number, digits = 3) => x.toFixed(digits)
const signed = (x: number) => (x >= 0 ? `+${num(x)}` : num(x))

const preview = (text: string, width: number) => {
  const flat = text.replace(/\s+/g, " ").trim()
  return width > 0 && flat.length > width ? `${flat.slice(0, width - 1)}…` : flat
}

export const describeScore = (score: FadeScore) => {
  const parts = Object.entries(score.parts)
    .map(([name, value]) => `${name} ${signed(value)}`)
    .join(", ")
  const why =
    score.trigger === "threshold"
      ? `crossed the threshold ${num(score.threshold)}`
      : `budget pressure (usage ${num(score.usage, 2)} above τ ${num(score.tau, 2)})`
  return `score ${num(score.total)} = ${parts}; ${why}; usage ${num(score.usage, 2)}, τ ${num(score.tau, 2)}, agent clock ${iso(score.now)}`
}

const describeProducer = (p: Producer) =>
  `${p.kind} (${p.model}${p.attempts > 1 ? `, ${p.attempts} attempts` : ""}${p.fallbackReason ? `; fallback: ${p.fallbackReason}` : ""})`

const others = (n: number) => `${n} other ${n === 1 ? "entry" : "entries"}`
const formName = (form: string) => (form === "keyPoints" ? "key points" : form)

export interface DescribeOptions {
  /** Characters of content to show (0: all). */
  readonly width?: number
}

/** A label and a one-line description of what the event did to the entry. */
export const describe = (
  event: MemoryEvent,
  entryId: string,
  options: DescribeOptions = {},
): { kind: string; text: string } => {
  const width = options.width ?? 100
  switch (event._tag) {
    case "EntryRecorded":
      return {
        kind: "recorded",
        text: `${event.origin}, ${event.tokens} tokens, emotional weight ${event.emotionalWeight}${
          event.tags.length > 0 ? `, tags ${event.tags.join(", ")}` : ""
        }${event.correlationId ? `, correlation ${event.correlationId}` : ""}: "${preview(event.content, width)}"`,
      }
    case "EntriesRead": {
      const item = event.served.find((s) => s.entryId === entryId)!
      return {
        kind: "read",
        text: `served ${item.cue ? "as a cue " : ""}as ${formName(item.form)} in a context of ${event.tokens}/${event.budget} tokens with ${others(
          event.served.length - 1,
        )}${event.stepId ? ` (step ${event.stepId})` : " (no step)"}`,
      }
    }
    case "EntriesReferenced":
      return {
        kind: "referenced",
        text: `used by the agent in step ${event.stepId}${event.entryIds.length > 1 ? ` (with ${others(event.entryIds.length - 1)})` : ""}`,
      }
    case "RungChanged":
      return {
        kind: `rung ${event.from}→${event.to}`,
        text: `${event.to === 1 ? "key points" : "summary"} of ${event.tokens} tokens by ${describeProducer(event.producer)}; ${describeScore(
          event.score,
        )}: "${preview(event.text, width)}"`,
      }
    case "EntryDemoted":
      return {
        kind: "demoted",
        text: `left working from rung ${event.from} for long-term; embedding ${event.embedding.model} (${event.embedding.dims} dims) by ${describeProducer(
          event.embedding.producer,
        )}; ${describeScore(event.score)}`,
      }
    case "CueRehydrated":
      return {
        kind: "cue",
        text: `rehydrated from long-term by ${event.trigger} (relevance ${num(event.relevance)}) for step ${event.stepId}, as ${formName(
          event.recalled.form,
        )} of ${event.recalled.tokens} tokens`,
      }
    case "CuesRehydrated": {
      const cue = event.cues.find((c) => c.entryId === entryId)
      return cue === undefined
        ? { kind: "cue", text: `not among the ${event.cues.length} cues recalled for step ${event.stepId}` }
        : {
            kind: "cue",
            text: `rehydrated from long-term by ${event.trigger} (relevance ${num(cue.relevance)}) for step ${event.stepId}, as ${formName(
              cue.recalled.form,
            )} of ${cue.recalled.tokens} tokens, with ${others(event.cues.length - 1)}`,
          }
    }
    case "CuePromoted":
      return {
        kind: "promoted",
        text: `back into working as a native entry by ${event.trigger}${event.stepId ? ` in step ${event.stepId}` : ""}, as ${formName(
          event.recalled.form,
        )}`,
      }
    case "CueDropped":
    case "CuesDropped":
      return { kind: "cue dropped", text: `not referenced in step ${event.stepId}; the long-term record is unchanged` }
    default:
      return { kind: event._tag, text: "" }
  }
}

export const formatHistory = (
  agentId: string,
  entryId: string,
  items: ReadonlyArray<HistoryItem>,
  options: DescribeOptions = {},
): string => {
  const seqWidth = Math.max(...items.map((i) => String(i.seq).length), 1)
  const lines = [`Entry ${entryId} of agent ${agentId}: ${items.length} event${items.length === 1 ? "" : "s"}`, ""]
  for (const item of items) {
    const { kind, text } = describe(item.event, entryId, options)
    lines.push(`  #${String(item.seq).padStart(seqWidth)}  ${iso(item.event.at)}  ${kind.padEnd(12)} ${text}`)
  }
  return `${lines.join("\n")}\n`
}

export const historyJson = (agentId: string, entryId: string, items: ReadonlyArray<HistoryItem>) => ({
  agentId,
  entryId,
  events: items.map((i) => ({
    seq: i.seq,
    subject: i.subject,
    at: iso(i.event.at),
    type: i.event._tag,
    kind: describe(i.event, entryId, { width: 0 }).kind,
    event: i.event,
  })),
})
