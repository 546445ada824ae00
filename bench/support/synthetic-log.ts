/**
 * Fills a stream with a realistic mix of events, fast: many agents, each
 * registering, recording entries, running steps and building contexts.
 * Appended with raw windowed publishes (the gateway is not what is measured).
 */
import { jetstream } from "@nats-io/jetstream"
import type { NatsConnection } from "@nats-io/transport-node"
import type { EventOf, MemoryEvent } from "../../contracts/events.ts"
import { eventSubject } from "../../contracts/subjects.ts"
import { blockTokens } from "../../domain/render.ts"

const WORDS =
  "the plan report budget user said meeting travel hotel price review draft agent memory context summary deadline team design issue result idea note".split(
    " ",
  )

/** A deterministic sentence of `n` words, varied by `seed`. */
export const sentence = (seed: number, n: number): string => {
  const out: string[] = []
  let x = seed * 2654435761
  for (let i = 0; i < n; i++) {
    x = (x * 1103515245 + 12345) >>> 0
    out.push(WORDS[x % WORDS.length]!)
  }
  return `${out.join(" ")}.`
}

export interface SyntheticOptions {
  /**
   * Fades as the fade worker would at steady state: once an agent holds more recorded entries than this,
   * its oldest is demoted (an `EntryDemoted` carrying its facts), so working stays within a budget's worth.
   * Unset: nothing is demoted and working grows with the log.
   */
  readonly workingEntries?: number
}

export function* syntheticEvents(total: number, agents = 50, options: SyntheticOptions = {}): Generator<MemoryEvent> {
  const T0 = Date.UTC(2025, 0, 1)
  let n = 0
  const env = (agentId: string, at: number) => ({
    v: 1 as const,
    eventId: `bench-${n}`,
    agentId,
    at,
    causationId: null,
    correlationId: null,
  })
  const entriesOf = new Map<string, string[]>()
  for (let a = 0; a < agents && n < total; a++, n++) {
    const agentId = `agent-${a}`
    entriesOf.set(agentId, [])
    yield {
      _tag: "AgentRegistered",
      ...env(agentId, T0),
      config: { id: agentId, role: "main", budget: 8_000, encoding: "o200k_base" },
    }
  }
  const recordedOf = new Map<string, EventOf<"EntryRecorded">>()
  while (n < total) {
    const agentId = `agent-${n % agents}`
    const ids = entriesOf.get(agentId)!
    const at = T0 + n * 1_000
    const kind = n % 10
    if (options.workingEntries !== undefined && ids.length > options.workingEntries) {
      const entryId = ids.shift()!
      const entry = recordedOf.get(entryId)!
      recordedOf.delete(entryId)
      yield {
        _tag: "EntryDemoted",
        ...env(agentId, at),
        v: 2,
        entryId,
        from: 0,
        score: {
          total: 0.9,
          parts: { age: 0.9, frequency: 0, emotion: 0, focus: 0, pressure: 0 },
          trigger: "threshold",
          threshold: 0.5,
          usage: 0.85,
          tau: 0.8,
          now: at,
        },
        embedding: {
          model: "synthetic",
          dims: 0,
          vector: "",
          producer: { kind: "offline", model: "synthetic", fallbackReason: null, attempts: 1 },
        },
        entry: {
          timestamp: entry.timestamp,
          origin: entry.origin,
          correlationId: null,
          tags: [],
          moodSnapshot: null,
          emotionalWeight: 0,
          rawTokens: entry.tokens,
          keyPoints: null,
          summary: null,
          citationCount: 0,
        },
      }
    } else if (kind === 8 && ids.length > 0) {
      yield {
        _tag: "EntriesRead",
        ...env(agentId, at),
        stepId: null,
        budget: 8_000,
        tokens: 1_000,
        served: ids.slice(-30).map((entryId) => ({ entryId, form: "raw" as const, cue: false })),
      }
    } else if (kind === 9) {
      yield { _tag: "StepStarted", ...env(agentId, at), stepId: `s${n}`, focus: { task: "bench task" } }
    } else {
      const content = sentence(n, 20 + (n % 30))
      const entryId = `e${n}`
      ids.push(entryId)
      const event: EventOf<"EntryRecorded"> = {
        _tag: "EntryRecorded",
        ...env(agentId, at),
        entryId,
        timestamp: at,
        origin: n % 3 === 0 ? "INTERNAL" : "USER",
        content,
        tags: [],
        moodSnapshot: null,
        emotionalWeight: 0,
        tokens: blockTokens({ timestamp: at, origin: "USER" }, "raw", content, "o200k_base"),
      }
      if (options.workingEntries !== undefined) recordedOf.set(entryId, event)
      yield event
    }
    n++
  }
}

/** Publishes with up to `window` acknowledgements outstanding. */
export const publishWindowed = async (
  nc: NatsConnection,
  messages: Iterable<{ subject: string; data: Uint8Array; msgID?: string }>,
  window = 512,
): Promise<number> => {
  const js = jetstream(nc)
  const inflight = new Set<Promise<unknown>>()
  let count = 0
  for (const m of messages) {
    const p: Promise<unknown> = js
      .publish(m.subject, m.data, m.msgID ? { msgID: m.msgID } : {})
      .then(() => inflight.delete(p))
    inflight.add(p)
    count++
    if (inflight.size >= window) await Promise.race(inflight)
  }
  await Promise.all(inflight)
  return count
}

const encoder = new TextEncoder()
export const fillLog = (nc: NatsConnection, total: number, agents = 50) =>
  publishWindowed(
    nc,
    (function* () {
      for (const event of syntheticEvents(total, agents)) {
        yield { subject: eventSubject(event), data: encoder.encode(JSON.stringify(event)), msgID: event.eventId }
      }
    })(),
  )
