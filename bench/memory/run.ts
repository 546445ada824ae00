/**
 * The memory benchmark: what the working views retain on the heap, folded in
 * process by the real reducer (`evolve`) from events decoded from JSON, and
 * what their snapshots take (`encodeView`, as JSON bytes). Retained heap is
 * `heapUsed` after two full collections (node --expose-gc), as a difference
 * between two states of the same views:
 *
 *   - idle agents: N agents registered with no entries, freshly and once
 *     their seen-event-id memory is full (an agent that has lived a while);
 *   - working entries: agents that record E entries of one kind each, then
 *     see them fade to key points, to summaries, and demote to long-term;
 *   - a long history: one agent recording 100k entries over 10k steps, the
 *     fade keeping a budget's worth in working and demoting the rest.
 */
import { HashMap } from "effect"
import type { MemoryEvent } from "../../contracts/events.ts"
import { type AgentView, evolve, SEEN_GENERATION, SEEN_IDS, seenIdCount } from "../../domain/agent-view.ts"
import { encodeView } from "../../services/platform/partitions/view-codec.ts"
import {
  agentIdOf,
  demotedEvent,
  ENTRY_KINDS,
  type EntryKind,
  type EntryText,
  entryIdOf,
  entryTexts,
  fadedEvent,
  recordedEvent,
  registeredEvent,
  stepEndedEvent,
  stepStartedEvent,
} from "./events.ts"

export interface MemoryOptions {
  /** Agent counts for the idle-agent figures. */
  readonly idleAgents: ReadonlyArray<number>
  /** Agents holding working entries, and entries each. */
  readonly entryAgents: number
  readonly entriesPerAgent: number
  /** The long history: entries, steps they are recorded over, the agent's budget. */
  readonly historyEntries: number
  readonly historySteps: number
  readonly budget: number
  readonly log: (line: string) => void
}

export interface IdleFigures {
  readonly agents: number
  readonly bytesPerAgent: number
  readonly bytesPerAgentSeenFull: number
  readonly snapshotBytesPerAgent: number
  readonly snapshotBytesPerAgentSeenFull: number
}

/** Per entry, beyond the agent's own base, at each stage of its life in working. */
interface Stages<T> {
  readonly raw: T
  readonly keyPoints: T
  readonly summary: T
  readonly demoted: T
}

export interface EntryFigures {
  readonly kind: EntryKind
  readonly agents: number
  readonly entriesPerAgent: number
  /** Mean over the texts used: characters and tokens of the raw text, tokens of key points and summary. */
  readonly chars: number
  readonly tokens: Stages<number>
  readonly bytesPerEntry: Stages<number>
  readonly snapshotBytesPerEntry: Stages<number>
}

export interface HistoryCheckpoint {
  readonly entries: number
  readonly demoted: number
  readonly working: number
  readonly usage: number
  readonly seenIds: number
  /** Retained by the agent's view, beyond the heap before it was registered. */
  readonly viewBytes: number
  readonly snapshotBytes: number
}

export interface HistoryFigures {
  readonly entries: number
  readonly steps: number
  readonly budget: number
  readonly mostWorking: number
  readonly mostUsage: number
  readonly checkpoints: ReadonlyArray<HistoryCheckpoint>
  /** Slope between the first and last checkpoints. */
  readonly bytesPerDemoted: number
  readonly snapshotBytesPerDemoted: number
}

export interface MemoryReport {
  readonly node: string
  readonly measure: string
  readonly idle: ReadonlyArray<IdleFigures>
  readonly entries: ReadonlyArray<EntryFigures>
  readonly history: HistoryFigures
}

const collect = (): (() => void) => {
  const gc = (globalThis as { gc?: () => void }).gc
  if (gc === undefined) throw new Error("run node with --expose-gc (npm run bench:memory passes it)")
  return gc
}

/** Bytes the heap holds once everything unreachable is collected. */
const retained = (): number => {
  const gc = collect()
  gc()
  gc()
  return process.memoryUsage().heapUsed
}

const snapshotBytes = (view: AgentView): number => Buffer.byteLength(JSON.stringify(encodeView(view)))
const totalSnapshotBytes = (views: ReadonlyMap<string, AgentView>): number => {
  let bytes = 0
  for (const view of views.values()) bytes += snapshotBytes(view)
  return bytes
}
const round = (x: number) => Math.round(x)
const mean = (xs: ReadonlyArray<number>) => xs.reduce((a, b) => a + b, 0) / xs.length

/** The views of a partition, held as the working service holds them. */
class Views {
  readonly byAgent = new Map<string, AgentView>()
  #seq = 0

  apply(event: MemoryEvent): void {
    const next = evolve(this.byAgent.get(event.agentId), event, { seq: ++this.#seq })
    if (next === undefined) this.byAgent.delete(event.agentId)
    else this.byAgent.set(event.agentId, next)
  }
}

// Step events enough to fill an agent's seen-id memory (and turn over its newest generation).
const SEEN_FILL_STEPS = (SEEN_IDS + 2 * SEEN_GENERATION) / 2

const fillSeen = (views: Views, agents: ReadonlyArray<string>): void => {
  for (const agentId of agents)
    for (let s = 0; s < SEEN_FILL_STEPS; s++) {
      views.apply(stepStartedEvent(agentId, `warm-${s}`, s * 2))
      views.apply(stepEndedEvent(agentId, `warm-${s}`, s * 2 + 1))
    }
}

const measureIdle = (agents: number, log: MemoryOptions["log"]): IdleFigures => {
  const ids = Array.from({ length: agents }, (_, a) => agentIdOf(a))
  const before = retained()
  const views = new Views()
  for (const id of ids) views.apply(registeredEvent(id, 8_000))
  const fresh = retained()
  const freshSnapshot = totalSnapshotBytes(views.byAgent)
  fillSeen(views, ids)
  const seenFull = retained()
  const figures = {
    agents,
    bytesPerAgent: round((fresh - before) / agents),
    bytesPerAgentSeenFull: round((seenFull - before) / agents),
    snapshotBytesPerAgent: round(freshSnapshot / agents),
    snapshotBytesPerAgentSeenFull: round(totalSnapshotBytes(views.byAgent) / agents),
  }
  log(
    `idle: ${agents} agents, ${figures.bytesPerAgent} B each, ${figures.bytesPerAgentSeenFull} B with a full seen list`,
  )
  return figures
}

// Distinct texts per kind; each entry folds its own decoded copy of one.
const TEXTS_PER_KIND = 256

const measureEntries = (kind: EntryKind, agents: number, perAgent: number, log: MemoryOptions["log"]): EntryFigures => {
  const texts = entryTexts(kind, TEXTS_PER_KIND, kind === "note" ? 0 : 1_000_000)
  const ids = Array.from({ length: agents }, (_, a) => agentIdOf(a))
  const textOf = (a: number, e: number): EntryText => texts[(a * perAgent + e) % texts.length]!
  const entryOf = (a: number, e: number) => entryIdOf(a * perAgent + e)
  const views = new Views()
  for (const id of ids) views.apply(registeredEvent(id, 1_000_000))
  fillSeen(views, ids)
  const base = retained()
  const baseSnapshot = totalSnapshotBytes(views.byAgent)
  const stage = (apply: (agentId: string, a: number, e: number) => MemoryEvent) => {
    ids.forEach((agentId, a) => {
      for (let e = 0; e < perAgent; e++) views.apply(apply(agentId, a, e))
    })
    const entries = agents * perAgent
    return {
      bytes: round((retained() - base) / entries),
      snapshot: round((totalSnapshotBytes(views.byAgent) - baseSnapshot) / entries),
    }
  }
  const T0 = 1_000_000
  const raw = stage((agentId, a, e) => recordedEvent(agentId, entryOf(a, e), textOf(a, e), T0 + e))
  const keyPoints = stage((agentId, a, e) => fadedEvent(agentId, entryOf(a, e), textOf(a, e), 1, T0 + 1_000 + e))
  const summary = stage((agentId, a, e) => fadedEvent(agentId, entryOf(a, e), textOf(a, e), 2, T0 + 2_000 + e))
  const demoted = stage((agentId, a, e) => demotedEvent(agentId, entryOf(a, e), textOf(a, e), T0 + e, T0 + 3_000 + e))
  const figures: EntryFigures = {
    kind,
    agents,
    entriesPerAgent: perAgent,
    chars: round(mean(texts.map((t) => t.content.length))),
    tokens: {
      raw: round(mean(texts.map((t) => t.rawTokens))),
      keyPoints: round(mean(texts.map((t) => t.keyPoints.tokens))),
      summary: round(mean(texts.map((t) => t.summary.tokens))),
      demoted: 0,
    },
    bytesPerEntry: { raw: raw.bytes, keyPoints: keyPoints.bytes, summary: summary.bytes, demoted: demoted.bytes },
    snapshotBytesPerEntry: {
      raw: raw.snapshot,
      keyPoints: keyPoints.snapshot,
      summary: summary.snapshot,
      demoted: demoted.snapshot,
    },
  }
  log(
    `entries (${kind}, ${figures.tokens.raw} tokens): ${raw.bytes} B raw, ${keyPoints.bytes} B key points, ${summary.bytes} B summary, ${demoted.bytes} B demoted`,
  )
  return figures
}

/**
 * One agent's long history. Every tenth entry is a tool's result, the rest
 * notes; an entry fades to key points KEY_POINTS_AFTER entries after it was
 * recorded, to its summary SUMMARY_AFTER entries after, and demotes
 * DEMOTE_AFTER entries after: the fade's order, oldest first, kept under the
 * budget's threshold (checked: `mostUsage`).
 */
const KEY_POINTS_AFTER = 40
const SUMMARY_AFTER = 80
const DEMOTE_AFTER = 200

/** Replaces an agent's view, keeping no reference to the one it replaces. */
const measureHistory = (options: MemoryOptions): HistoryFigures => {
  const { historyEntries: total, historySteps: steps, budget, log } = options
  const notes = entryTexts("note", TEXTS_PER_KIND, 2_000_000)
  const results = entryTexts("toolResult", TEXTS_PER_KIND / 4, 3_000_000)
  const textOf = (n: number): EntryText =>
    n % 10 === 9 ? results[Math.floor(n / 10) % results.length]! : notes[n % notes.length]!
  const agentId = agentIdOf(0)
  const perStep = Math.ceil(total / steps)
  const marks = new Set([Math.floor(total / 10), Math.floor(total / 4), Math.floor(total / 2), total])
  const views = new Views()
  const before = retained()
  views.apply(registeredEvent(agentId, budget))
  const checkpoints: HistoryCheckpoint[] = []
  let mostWorking = 0
  let mostUsage = 0
  const at = (n: number) => 1_000_000 + n * 1_000
  for (let n = 0; n < total; ) {
    const stepId = `step-${Math.floor(n / perStep)}`
    views.apply(stepStartedEvent(agentId, stepId, at(n)))
    for (let k = 0; k < perStep && n < total; k++, n++) {
      views.apply(recordedEvent(agentId, entryIdOf(n), textOf(n), at(n)))
      const fade = (m: number, apply: (id: string, text: EntryText) => MemoryEvent) => {
        if (m >= 0) views.apply(apply(entryIdOf(m), textOf(m)))
      }
      fade(n - KEY_POINTS_AFTER, (id, text) => fadedEvent(agentId, id, text, 1, at(n)))
      fade(n - SUMMARY_AFTER, (id, text) => fadedEvent(agentId, id, text, 2, at(n)))
      fade(n - DEMOTE_AFTER, (id, text) => demotedEvent(agentId, id, text, at(n - DEMOTE_AFTER), at(n)))
      const view = views.byAgent.get(agentId)!
      mostWorking = Math.max(mostWorking, HashMap.size(view.entries))
      mostUsage = Math.max(mostUsage, view.usage)
      if (marks.has(n + 1)) {
        const bytes = retained() - before
        checkpoints.push({
          entries: n + 1,
          demoted: Math.max(0, n + 1 - DEMOTE_AFTER),
          working: HashMap.size(view.entries),
          usage: view.usage,
          seenIds: seenIdCount(view.seen),
          viewBytes: bytes,
          snapshotBytes: snapshotBytes(view),
        })
        log(
          `history: ${n + 1} entries, ${Math.max(0, n + 1 - DEMOTE_AFTER)} demoted, view ${(bytes / 2 ** 20).toFixed(1)} MB`,
        )
      }
    }
    views.apply(stepEndedEvent(agentId, stepId, at(n)))
  }
  const first = checkpoints[0]!
  const last = checkpoints.at(-1)!
  const slope = (f: (c: HistoryCheckpoint) => number) => round((f(last) - f(first)) / (last.demoted - first.demoted))

  return {
    entries: total,
    steps,
    budget,
    mostWorking,
    mostUsage,
    checkpoints,
    bytesPerDemoted: slope((c) => c.viewBytes),
    snapshotBytesPerDemoted: slope((c) => c.snapshotBytes),
  }
}

export const runMemoryBench = (options: MemoryOptions): MemoryReport => {
  collect()
  const started = Date.now()
  const log = (line: string) => options.log(`${line} (${((Date.now() - started) / 1000).toFixed(1)} s)`)
  const idle = options.idleAgents.map((n) => measureIdle(n, log))
  const entries = (Object.keys(ENTRY_KINDS) as EntryKind[]).map((kind) =>
    measureEntries(kind, options.entryAgents, options.entriesPerAgent, log),
  )
  const history = measureHistory({ ...options, log })
  return {
    node: process.version,
    measure: "process.memoryUsage().heapUsed after two full collections, difference between two states",
    idle,
    entries,
    history,
  }
}
