/**
 * `wm verify`: rebuilds projections from the log and compares them with the
 * live ones. Each projection is one named check; a check reports every
 * difference it finds (which agent, which entry, which field, both values).
 *
 * working-views: for every agent registered in the log (subjects
 * `wm.evt.*.*.agent`), asks the running working service for its view
 * (`view.get`, which says up to which stream sequence it has applied the
 * log), folds the agent's events up to that same sequence with the shared
 * reducer, and compares the two field by field.
 *
 * working-snapshots, gateway-snapshots, memory-snapshots, fade-snapshots:
 * each partition's latest snapshot of that service (the wm_snapshots
 * bucket) against the log folded to the sequence the snapshot covers, so
 * snapshot, live view and rebuild are all compared; for the memory service
 * and fade also what they keep beside the views (indexes, raw texts).
 *
 * substrate: every EntryRecorded of the log read back as `getRaw` reads it
 * (the first message on the entry's subject).
 *
 * Further projections are added as checks in CHECKS (the embedded long-term
 * store lives inside its service; it is checked by rebuilding it in the tests).
 */

import { jetstreamManager } from "@nats-io/jetstream"
import { Kvm } from "@nats-io/kv"
import type { NatsConnection } from "@nats-io/transport-node"
import { Effect } from "effect"
import type { ResponseOf } from "../../contracts/api.ts"
import { SNAPSHOT_BUCKET } from "../../contracts/buckets.ts"
import type { MemoryEvent } from "../../contracts/events.ts"
import { partitionCount, partitionOf } from "../../contracts/partitions.ts"
import { ALL_AGENT_CONFIG, ALL_EVENTS, agentIdOfEventSubject, EVENTS_STREAM } from "../../contracts/subjects.ts"
import { type AgentView, evolve, viewResponseOf as viewOf } from "../../domain/agent-view.ts"
import { KeptTexts } from "../../services/fade/kept-texts.ts"
import { EpisodeIndex } from "../../services/memory/retrieval/episodes.ts"
import { indexEvent, memoryIndexState } from "../../services/memory/retrieval/index-state.ts"
import { LexicalIndex } from "../../services/memory/retrieval/lexical-index.ts"
import { WorkingTexts } from "../../services/memory/retrieval/working-texts.ts"
import { callOperation, type NoAnswer } from "../../services/platform/api/call.ts"
import { makeSnapshotKeys } from "../../services/platform/keys/snapshot-keys.ts"
import type { KeptState } from "../../services/platform/partitions/partitioned-views.ts"
import { makeSnapshotStore, type ReadSnapshot } from "../../services/platform/partitions/snapshots.ts"
import { readRecorded } from "../../services/platform/substrate-reader.ts"
import { contentKeysOf, scanLog, subjectsMatching } from "./log.ts"
import type { Progress } from "./progress.ts"

export interface Difference {
  readonly agent?: string
  readonly entry?: string
  /** Dotted path of the field inside the view or the entry. */
  readonly field: string
  readonly live: unknown
  readonly log: unknown
}

export interface Unchecked {
  readonly agent?: string
  readonly reason: string
}

export interface CheckOutcome {
  /** What was compared, e.g. "3 agents at their applied sequences". */
  readonly summary: string
  readonly differences: ReadonlyArray<Difference>
  /** What could not be compared (the check then fails too: nothing unverified passes). */
  readonly unchecked: ReadonlyArray<Unchecked>
}

export interface AuditContext {
  readonly nc: NatsConnection
  readonly timeoutMs: number
  readonly progress: (label: string) => Progress
}

export interface VerifyCheck {
  readonly name: string
  readonly description: string
  readonly run: (context: AuditContext) => Promise<CheckOutcome>
}

// ---------------------------------------------------------------------------
// Comparison

/** Key-sorted JSON: two values are the same when their canonical texts are. */
export const canonical = (value: unknown): string =>
  JSON.stringify(value, (_key, v: unknown) =>
    v !== null && typeof v === "object" && !Array.isArray(v)
      ? Object.fromEntries(
          Object.entries(v as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)),
        )
      : v,
  ) ?? "undefined"

const isPlainObject = (v: unknown): v is Record<string, unknown> =>
  v !== null && typeof v === "object" && !Array.isArray(v)

/** Field-level differences between two JSON values, by dotted path. */
export const diffValues = (
  path: string,
  live: unknown,
  log: unknown,
  out: Array<{ field: string; live: unknown; log: unknown }>,
) => {
  if (canonical(live) === canonical(log)) return
  if (isPlainObject(live) && isPlainObject(log)) {
    const keys = Array.from(new Set([...Object.keys(live), ...Object.keys(log)])).sort()
    for (const k of keys) diffValues(path ? `${path}.${k}` : k, live[k], log[k], out)
    return
  }
  out.push({ field: path || "(value)", live, log })
}

type ViewResponse = ResponseOf<"getView">

/** The reply `view.get` gives for a view: the same function the working service answers with. */
export const viewResponseOf = (view: AgentView, appliedSeq: number): ViewResponse => viewOf(view, appliedSeq)

/** Differences between a live view and the rebuilt one, entries matched by id. */
export const compareViews = (agent: string, live: ViewResponse, rebuilt: ViewResponse): Difference[] => {
  const out: Difference[] = []
  const json = <T>(v: T): T => JSON.parse(JSON.stringify(v)) as T
  const a = json(live) as unknown as Record<string, unknown>
  const b = json(rebuilt) as unknown as Record<string, unknown>
  const fields: Array<{ field: string; live: unknown; log: unknown }> = []
  for (const key of Array.from(new Set([...Object.keys(a), ...Object.keys(b)])).sort()) {
    if (key === "entries" || key === "appliedSeq") continue
    diffValues(key, a[key], b[key], fields)
  }
  for (const f of fields) out.push({ agent, ...f })

  const byId = (entries: unknown) =>
    new Map((entries as Array<{ id: string }>).map((e) => [e.id, e as unknown as Record<string, unknown>]))
  const liveEntries = byId(a.entries)
  const logEntries = byId(b.entries)
  for (const id of Array.from(new Set([...liveEntries.keys(), ...logEntries.keys()])).sort()) {
    const l = liveEntries.get(id)
    const r = logEntries.get(id)
    if (l === undefined || r === undefined) {
      out.push({ agent, entry: id, field: "(entry)", live: l ? "present" : "absent", log: r ? "present" : "absent" })
      continue
    }
    const entryFields: Array<{ field: string; live: unknown; log: unknown }> = []
    diffValues("", l, r, entryFields)
    for (const f of entryFields) out.push({ agent, entry: id, ...f })
  }
  return out
}

// ---------------------------------------------------------------------------
// The working-views check

type LiveView =
  | { readonly ok: true; readonly view: ViewResponse }
  | { readonly ok: false; readonly tag: string; readonly message: string }

const askView = async (nc: NatsConnection, agentId: string, timeoutMs: number): Promise<LiveView> => {
  const answer = await Effect.runPromise(
    callOperation(nc, agentId, "getView", {}, { timeout: timeoutMs }).pipe(
      Effect.map((view): LiveView | NoAnswer => ({ ok: true, view })),
      Effect.catch((error) =>
        Effect.succeed<LiveView | NoAnswer>(
          error._tag === "NoAnswer" ? error : { ok: false, tag: error._tag, message: error.message },
        ),
      ),
    ),
  )
  if ("_tag" in answer)
    throw new Error(`the working service did not answer ${answer.subject}: ${answer.reason}`, { cause: answer })
  return answer
}

/** Runs `task` over `items`, at most `limit` at a time. */
const mapLimited = async <A, B>(items: ReadonlyArray<A>, limit: number, task: (a: A) => Promise<B>): Promise<B[]> => {
  const out: B[] = new Array(items.length)
  let next = 0
  const worker = async () => {
    while (next < items.length) {
      const i = next++
      out[i] = await task(items[i]!)
    }
  }
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker))
  return out
}

export const workingViewsCheck: VerifyCheck = {
  name: "working-views",
  description:
    "each agent's working view, as the working service serves it, against the log folded to the same sequence",
  run: async ({ nc, timeoutMs, progress }) => {
    const agents = Object.keys(await subjectsMatching(nc, ALL_AGENT_CONFIG))
      .map(agentIdOfEventSubject)
      .sort()
    if (agents.length === 0) return { summary: "no agents in the log", differences: [], unchecked: [] }

    const live = new Map<string, LiveView>()
    const answers = await mapLimited(agents, 16, async (a) => [a, await askView(nc, a, timeoutMs)] as const)
    for (const [a, v] of answers) live.set(a, v)
    const appliedOf = (a: string) => {
      const v = live.get(a)
      return v?.ok ? v.view.appliedSeq : undefined
    }
    const until = Math.max(0, ...agents.map((a) => appliedOf(a) ?? 0))

    // One pass over the log; each agent's events are folded up to the sequence its live view had applied.
    const rebuilt = new Map<string, AgentView>()
    const known = new Set(agents)
    await scanLog(nc, { filter: ALL_EVENTS, untilSeq: until, progress: progress("verify working-views") }, (r) => {
      const event: MemoryEvent | null = r.event
      if (event === null || !known.has(event.agentId)) return
      const applied = appliedOf(event.agentId) ?? until
      if (r.seq > applied) return
      try {
        const next = evolve(rebuilt.get(event.agentId), event, { seq: r.seq })
        if (next !== undefined) rebuilt.set(event.agentId, next)
      } catch {
        // The live projection dead-letters an event whose application throws; so does the rebuild.
      }
    })

    const differences: Difference[] = []
    const unchecked: Unchecked[] = []
    for (const a of agents) {
      const l = live.get(a)!
      const r = rebuilt.get(a)
      if (!l.ok) {
        // A forgotten agent is absent from both.
        if (l.tag === "AgentNotFound" && r === undefined) continue
        // Registered in the log (it has a configuration subject) yet unknown to the working service.
        if (l.tag === "AgentNotFound")
          differences.push({ agent: a, field: "(agent)", live: "not found", log: "registered" })
        else unchecked.push({ agent: a, reason: `the working service answered ${l.tag}: ${l.message}` })
        continue
      }
      if (r === undefined) {
        differences.push({ agent: a, field: "(agent)", live: "present", log: `absent at seq ${l.view.appliedSeq}` })
        continue
      }
      differences.push(...compareViews(a, l.view, viewResponseOf(r, l.view.appliedSeq)))
    }
    const seqs = Array.from(new Set(agents.map(appliedOf).filter((s): s is number => s !== undefined)))
    const at = seqs.length === 1 ? `applied sequence ${seqs[0]}` : "their applied sequences"
    const compared = agents.length - unchecked.length
    return { summary: `${compared} agent${compared === 1 ? "" : "s"} compared at ${at}`, differences, unchecked }
  },
}

/**
 * The substrate: every EntryRecorded of the log is the first message on its
 * entry's subject, and reading it as `getRaw` does (the first message on the
 * subject, services/platform/substrate-reader.ts) gives back the same raw
 * text at the same sequence. The substrate keeps no store of its own, so
 * this is what it can get wrong: an entry subject whose first message is
 * not its EntryRecorded, or a second EntryRecorded for one entry.
 */
export const substrateCheck: VerifyCheck = {
  name: "substrate",
  description: "each EntryRecorded of the log against the entry as the substrate reads it from the log",
  run: async ({ nc, progress }) => {
    const expected = new Map<string, { agent: string; entry: string; content: string; seq: number }>()
    const differences: Difference[] = []
    await scanLog(nc, { filter: ALL_EVENTS, progress: progress("verify substrate") }, (r) => {
      const event: MemoryEvent | null = r.event
      if (event?._tag !== "EntryRecorded") return
      const key = `${event.agentId}.${event.entryId}`
      const first = expected.get(key)
      if (first === undefined)
        expected.set(key, { agent: event.agentId, entry: event.entryId, content: event.content, seq: r.seq })
      else
        differences.push({
          agent: event.agentId,
          entry: event.entryId,
          field: "(record)",
          live: `recorded first at ${first.seq}`,
          log: `recorded again at ${r.seq}`,
        })
    })
    const jsm = await jetstreamManager(nc)
    const keys = await contentKeysOf(nc)
    const read = await mapLimited(
      [...expected.values()],
      32,
      async (want) => [want, await readRecorded(jsm, keys, want.agent, want.entry)] as const,
    )
    for (const [want, record] of read) {
      const at = { agent: want.agent, entry: want.entry }
      if (record === null) differences.push({ ...at, field: "(record)", live: "absent", log: `present at ${want.seq}` })
      else if (record.seq !== want.seq) differences.push({ ...at, field: "seq", live: record.seq, log: want.seq })
      else if (record.content !== want.content)
        differences.push({ ...at, field: "content", live: record.content, log: want.content })
    }
    return {
      summary: `${expected.size} recorded entr${expected.size === 1 ? "y" : "ies"} compared`,
      differences,
      unchecked: [],
    }
  },
}

/** What a service keeps beside its views, rebuilt as the service folds the log (for its snapshots' check). */
interface KeptRebuild {
  readonly kept: KeptState<unknown>
  readonly apply: (event: MemoryEvent, before: AgentView | undefined, after: AgentView | undefined) => void
}

const memoryRebuild = (): KeptRebuild => {
  const lexical = new LexicalIndex()
  const episodes = new EpisodeIndex()
  const texts = new WorkingTexts()
  return {
    kept: memoryIndexState(lexical, episodes, texts),
    apply: (event, _before, after) => indexEvent(lexical, episodes, texts, event, after),
  }
}

const fadeRebuild = (): KeptRebuild => {
  const texts = new KeptTexts()
  return { kept: texts.kept(), apply: (event, before, after) => texts.apply(event, before, after) }
}

/**
 * A service's partition snapshots: each partition's latest snapshot, decoded as the service decodes it,
 * against the log folded to the sequence it covers — the views, and what the service keeps beside them
 * (the memory service's indexes, fade's kept texts), put back and taken again as the service would. A
 * snapshot that does not decode is reported as not compared (the service ignores it and rebuilds).
 */
const snapshotsCheck = (service: string, rebuild?: () => KeptRebuild): VerifyCheck => ({
  name: `${service}-snapshots`,
  description: `each partition's latest ${service} snapshot against the log folded to the sequence it covers`,
  run: async ({ nc, progress }) => {
    const kv = await new Kvm(nc).open(SNAPSHOT_BUCKET).catch(() => null)
    if (kv === null) return { summary: "no snapshot bucket", differences: [], unchecked: [] }
    try {
      await kv.status()
    } catch {
      return { summary: "no snapshot bucket", differences: [], unchecked: [] }
    }
    const jsm = await jetstreamManager(nc)
    const streamCreated = (await jsm.streams.info(EVENTS_STREAM)).created
    const partitions = partitionCount()
    const fromSnapshots = rebuild?.()
    const fromLog = rebuild?.()
    const store = makeSnapshotStore(kv, {
      service,
      partitions,
      streamCreated,
      chunkBytes: 1,
      erase: async () => undefined,
      keys: makeSnapshotKeys((await contentKeysOf(nc)).store, jsm),
      ...(fromSnapshots === undefined ? {} : { state: fromSnapshots.kept }),
    })
    const snapshots = new Map<number, ReadSnapshot>()
    const unchecked: Unchecked[] = []
    for (let p = 0; p < partitions; p++) {
      const found = await store.read(p)
      if (typeof found !== "string") snapshots.set(p, found)
      else if (found !== "no snapshot") unchecked.push({ reason: `the snapshot of partition ${p}: ${found}` })
    }
    if (snapshots.size === 0) return { summary: "no snapshots", differences: [], unchecked }
    const until = Math.max(...[...snapshots.values()].map((s) => s.manifest.seq))
    const rebuilt = new Map<string, AgentView>()
    await scanLog(
      nc,
      { filter: ALL_EVENTS, untilSeq: until, progress: progress(`verify ${service}-snapshots`) },
      (r) => {
        const event: MemoryEvent | null = r.event
        if (event === null) return
        const snapshot = snapshots.get(partitionOf(event.agentId, partitions))
        if (snapshot === undefined || r.seq > snapshot.manifest.seq) return
        const before = rebuilt.get(event.agentId)
        let next: AgentView | undefined
        try {
          next = evolve(before, event, { seq: r.seq })
        } catch {
          // Dead-lettered by the live projection too.
          return
        }
        if (next !== undefined) rebuilt.set(event.agentId, next)
        else rebuilt.delete(event.agentId)
        fromLog?.apply(event, before, next)
      },
    )
    const differences: Difference[] = []
    let agents = 0
    for (const [p, snapshot] of snapshots) {
      const seq = snapshot.manifest.seq
      const ids = new Set([
        ...snapshot.views.keys(),
        ...[...rebuilt.keys()].filter((id) => partitionOf(id, partitions) === p),
      ])
      for (const id of [...ids].sort()) {
        agents++
        const s = snapshot.views.get(id)
        const r = rebuilt.get(id)
        if (s === undefined || r === undefined) {
          differences.push({
            agent: id,
            field: "(agent)",
            live: s ? "in the snapshot" : "not in the snapshot",
            log: r ? `present at seq ${seq}` : `absent at seq ${seq}`,
          })
          continue
        }
        differences.push(...compareViews(id, viewResponseOf(s, seq), viewResponseOf(r, seq)))
        if (fromSnapshots !== undefined && fromLog !== undefined) {
          fromSnapshots.kept.restore(id, snapshot.states.get(id))
          const kept = JSON.stringify(fromSnapshots.kept.take(id))
          const folded = JSON.stringify(fromLog.kept.take(id))
          if (kept !== folded)
            differences.push({
              agent: id,
              field: `(${fromSnapshots.kept.format})`,
              live: `${kept.length} bytes in the snapshot`,
              log: `${folded.length} bytes folded from the log at seq ${seq}`,
            })
        }
      }
    }
    return {
      summary: `${agents} agent${agents === 1 ? "" : "s"} in ${snapshots.size} partition snapshot${snapshots.size === 1 ? "" : "s"} compared`,
      differences,
      unchecked,
    }
  },
})

export const workingSnapshotsCheck = snapshotsCheck("working")

/** Every check `wm verify` runs, in order. */
export const CHECKS: ReadonlyArray<VerifyCheck> = [
  workingViewsCheck,
  workingSnapshotsCheck,
  snapshotsCheck("gateway"),
  snapshotsCheck("memory", memoryRebuild),
  snapshotsCheck("fade", fadeRebuild),
  substrateCheck,
]

// ---------------------------------------------------------------------------
// Formatting

const show = (v: unknown) => (typeof v === "string" ? v : v === undefined ? "(missing)" : JSON.stringify(v))

export const describeUnchecked = (u: Unchecked) =>
  `${u.agent !== undefined ? `agent ${u.agent} ` : ""}not compared: ${u.reason}`

export const describeDifference = (d: Difference) =>
  `${d.agent !== undefined ? `agent ${d.agent}, ` : ""}${d.entry !== undefined ? `entry ${d.entry}, ` : ""}field ${d.field}: live ${show(
    d.live,
  )}, log ${show(d.log)}`
