/**
 * Where one step's time goes, read off the wire: while one agent steps alone, a subscription to every
 * subject (`>`) sees every message the services exchange with NATS — API requests and replies, event
 * appends and their acks, request-ledger writes, direct reads, and each event's delivery to each
 * service's projection — on the benchmark's own clock, the one its SDK calls are timed on. The inbox
 * each connection listens on (the server's connection list) says who made each request and who
 * received each delivery. Nothing in the services is changed or wrapped.
 *
 * Inside each call, every moment is given to what the handling service was doing: a round trip it was
 * waiting on (the oldest one outstanding, so concurrent appends count once), the wait for its own
 * projection to deliver the sequence it needs (after an append, or the `afterSeq` of the request),
 * or, when neither, its own CPU (and queueing on its event loop). A call to another service (the
 * working service's `step.recall` to retrieval) is broken down the same way inside. What the client
 * measured beyond the request's arrival and the reply's is the transit between client and service.
 */
import type { Msg, NatsConnection } from "@nats-io/transport-node"
import { parseRouteSubject } from "../../contracts/routing.ts"
import { EVENTS_STREAM } from "../../contracts/subjects.ts"
import type { TimedStep } from "./step-loop.ts"

export interface WireMessage {
  readonly t: number
  readonly subject: string
  readonly reply: string
  readonly expectedSubjectSeq: string | undefined
  /** The body, kept when small (acks, replies, requests): what a sequence is read from. */
  readonly body: string | undefined
}

export interface WireTap {
  readonly messages: () => ReadonlyArray<WireMessage>
  readonly stop: () => Promise<void>
}

const textDecoder = new TextDecoder()
const KEEP_BODY_BYTES = 2_048

/** Subscribes to every subject and keeps what passes, timed on arrival. */
export const tapWire = (nc: NatsConnection): WireTap => {
  const kept: WireMessage[] = []
  const subscription = nc.subscribe(">", {
    callback: (error, msg: Msg) => {
      if (error !== null) return
      kept.push({
        t: performance.now(),
        subject: msg.subject,
        reply: msg.reply ?? "",
        expectedSubjectSeq: msg.headers?.get("Nats-Expected-Last-Subject-Sequence") || undefined,
        body: msg.data.length <= KEEP_BODY_BYTES ? textDecoder.decode(msg.data) : undefined,
      })
    },
  })
  return {
    messages: () => kept,
    stop: async () => {
      await subscription.drain().catch(() => undefined)
    },
  }
}

/** Subjects each connection subscribes to, by connection name, from the server's connection list. */
export type Listeners = ReadonlyArray<{ readonly name: string; readonly subjects: ReadonlyArray<string> }>

export const readListeners = async (monitorUrl: string): Promise<Listeners> => {
  const response = await fetch(`${monitorUrl}/connz?subs=detail&limit=1024`)
  const body = (await response.json()) as {
    connections?: Array<{ name?: string; subscriptions_list_detail?: Array<{ subject: string }> }>
  }
  return (body.connections ?? []).map((c) => ({
    name: c.name ?? "?",
    subjects: (c.subscriptions_list_detail ?? []).map((s) => s.subject),
  }))
}

const matches = (pattern: string, subject: string): boolean => {
  const p = pattern.split(".")
  const s = subject.split(".")
  for (let i = 0; i < p.length; i++) {
    if (p[i] === ">") return s.length > i
    if (i >= s.length || (p[i] !== "*" && p[i] !== s[i])) return false
  }
  return p.length === s.length
}

/** The connection that receives messages on an inbox subject ("?" when none is known). */
const ownerOf = (listeners: Listeners) => {
  const inboxes = listeners.flatMap((l) =>
    l.subjects.filter((s) => s.startsWith("_INBOX")).map((subject) => ({ subject, name: l.name })),
  )
  const cache = new Map<string, string>()
  return (subject: string): string => {
    let name = cache.get(subject)
    if (name === undefined) {
      name = inboxes.find((i) => matches(i.subject, subject))?.name ?? "?"
      cache.set(subject, name)
    }
    return name
  }
}

/** One request made over NATS and its reply, as the wire saw them. */
interface Span {
  readonly requester: string
  readonly kind: string
  readonly start: number
  readonly end: number
  readonly subject: string
  /** The stream sequence the reply names (an append's ack, an API reply's `seq`). */
  readonly seq: number | undefined
  /** The `afterSeq` an API request asks for. */
  readonly afterSeq: number | undefined
}

interface Delivery {
  readonly t: number
  readonly to: string
  readonly seq: number
}

const jsonField = (body: string | undefined, read: (json: Record<string, unknown>) => unknown): number | undefined => {
  if (body === undefined) return undefined
  try {
    const value = read(JSON.parse(body) as Record<string, unknown>)
    return typeof value === "number" ? value : undefined
  } catch {
    return undefined
  }
}

/** Requests a service makes on its own account while it handles one: leases, progress reports, its consumers. */
const BACKGROUND = "background"

const kindOf = (m: WireMessage): string => {
  const s = m.subject
  if (s.startsWith("wm.api.")) return `api ${s.split(".").slice(3).join(".")}`
  // The same request as the server delivers it, routed to its partition (contracts/routing.ts).
  const routed = parseRouteSubject(s)
  if (routed !== undefined) return `api ${routed.operation}`
  if (s.startsWith("wm.evt.")) {
    let tag = "event"
    try {
      tag = String((JSON.parse(m.body ?? "{}") as { _tag?: string })._tag ?? "event")
    } catch {}
    return `append ${tag}`
  }
  if (s.startsWith("$KV.wm_requests.")) return m.expectedSubjectSeq === "0" ? "ledger reserve" : "ledger settle"
  if (s.startsWith("$KV.wm_leases.")) return BACKGROUND
  if (s.startsWith("$KV.")) return `kv put ${s.split(".")[1]}`
  // What each partition's progress report reads: the last record of the partition.
  if (s.startsWith("$JS.API.STREAM.MSG.GET.") && /"last_by_subj":"[^"]*\.>"/.test(m.body ?? "")) return BACKGROUND
  if (s.startsWith("$JS.API.CONSUMER.")) return BACKGROUND
  if (s.startsWith("$JS.API.DIRECT.GET.") || s.startsWith("$JS.API.STREAM.MSG.GET.")) {
    if (s.includes("KV_wm_leases")) return "read lease bucket"
    if (s.includes("KV_wm_requests")) return "ledger read"
    return s.includes(EVENTS_STREAM) ? "read log" : `read ${s.split(".")[4] ?? ""}`
  }
  if (s.startsWith("$JS.API.STREAM.INFO")) return "read log end"
  return `js ${s.split(".").slice(2, 4).join(".")}`
}

/** Pairs requests with their replies and finds each event's deliveries. */
const parseWire = (messages: ReadonlyArray<WireMessage>, owner: (inbox: string) => string) => {
  const spans: Span[] = []
  const deliveries: Delivery[] = []
  // A reply may reach the tap before its request does (the server forwards the two on separate paths):
  // replies are found by their subject, whichever came first.
  const onInbox = new Map<string, WireMessage>()
  // A delivery names its consumer (in its ack subject); the consumer's pulls say whose it is.
  const consumers = new Map<string, string>()
  const PULL = `$JS.API.CONSUMER.MSG.NEXT.${EVENTS_STREAM}.`
  for (const m of messages) {
    if (m.subject.startsWith("_INBOX") && !onInbox.has(m.subject)) onInbox.set(m.subject, m)
    if (m.subject.startsWith(PULL)) consumers.set(m.subject.slice(PULL.length), owner(m.reply))
  }
  for (const m of messages) {
    if (m.reply.startsWith("$JS.ACK.")) {
      // $JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>.<consumer seq>.<time>.<pending>, or with a
      // domain and an account hash after ACK (and a token at the end).
      const tokens = m.reply.split(".")
      const at = tokens.length >= 12 ? 4 : 2
      const seq = Number(tokens[at + 3])
      if (tokens[at] === EVENTS_STREAM && Number.isFinite(seq))
        deliveries.push({ t: m.t, to: consumers.get(tokens[at + 1] ?? "") ?? "?", seq })
      continue
    }
    if (m.reply === "" || m.subject.startsWith("$JS.API.CONSUMER.MSG.NEXT") || m.subject.startsWith("$JS.FC")) continue
    const reply = onInbox.get(m.reply)
    if (reply === undefined) continue
    const kind = kindOf(m)
    spans.push({
      requester: owner(m.reply),
      kind,
      start: m.t,
      end: Math.max(m.t, reply.t),
      subject: m.subject,
      seq: jsonField(reply.body, (j) =>
        typeof j.seq === "number" ? j.seq : (j.value as Record<string, unknown> | undefined)?.seq,
      ),
      afterSeq: kind.startsWith("api ") ? jsonField(m.body, (j) => j.afterSeq) : undefined,
    })
  }
  return { spans, deliveries }
}

/** Milliseconds by piece, and round trips by piece, of one part of the timeline. */
type Tally = Map<string, { ms: number; count: number }>
const add = (tally: Tally, piece: string, ms: number, count = 0) => {
  const t = tally.get(piece) ?? { ms: 0, count: 0 }
  t.ms += ms
  t.count += count
  tally.set(piece, t)
}

const SERVICE_OF_CALL: Readonly<Record<string, string>> = {
  record: "wm-gateway",
  beginStep: "wm-gateway",
  reference: "wm-gateway",
  endStep: "wm-gateway",
  buildContext: "wm-working",
}
/** Who answers a request a service makes of another. */
const RESPONDER: Readonly<Record<string, string>> = {
  "api step.recall": "wm-memory",
  "api memory.query": "wm-memory",
  "api substrate.get": "wm-substrate",
}

const pieceOf = (kind: string): string => {
  if (kind.startsWith("append ")) return "event appends (expected sequence)"
  if (kind.startsWith("ledger")) return "request ledger writes (reserve, settle)"
  if (kind === "read lease bucket") return "back-pressure reads (lease bucket)"
  if (kind === "read log" || kind === "read log end") return "log reads (direct get, stream info)"
  return kind
}

/**
 * Attributes [from, to] of `service`'s handling: round trips it waited on, waits for its projection,
 * its own time. `target` is the sequence its projection must reach first (the request's afterSeq);
 * `waitsAfterAppend`: whether the handler waits for its projection to apply what it appended (the
 * command handler's writes on a step or configuration subject do; an entry recorded and retrieval's
 * cues do not: services/platform/log/command-handler.ts), as it waits after a call to another service.
 */
const attribute = (
  tally: Tally,
  prefix: string,
  service: string,
  from: number,
  to: number,
  target: number | undefined,
  waitsAfterAppend: boolean,
  spans: ReadonlyArray<Span>,
  deliveries: ReadonlyArray<Delivery>,
) => {
  const own = spans.filter((s) => s.requester === service && s.kind !== BACKGROUND && s.start >= from && s.end <= to)
  const delivered = (seq: number) => deliveries.find((d) => d.to === service && d.seq === seq)?.t
  for (const span of own) add(tally, `${prefix}${span.kind.startsWith("api ") ? span.kind : pieceOf(span.kind)}`, 0, 1)
  let t = from
  let need = target
  while (t < to) {
    const active = own.filter((s) => s.start <= t && s.end > t).sort((a, b) => a.start - b.start)[0]
    if (active !== undefined) {
      const end = Math.min(active.end, to)
      const responder = RESPONDER[active.kind]
      if (responder !== undefined)
        attribute(
          tally,
          `${prefix}${active.kind} › `,
          responder,
          active.start,
          end,
          active.afterSeq,
          false,
          spans,
          deliveries,
        )
      else add(tally, `${prefix}${pieceOf(active.kind)}`, end - t)
      // The overlapping ones that end within it are waited on together with it.
      t = end
      // An event appended, or a recall that appended cues: the projection must reach it next.
      if ((waitsAfterAppend && active.kind.startsWith("append ")) || responder !== undefined) need = active.seq ?? need
      continue
    }
    const next = Math.min(to, ...own.filter((s) => s.start > t).map((s) => s.start))
    const at = need === undefined ? undefined : delivered(need)
    if (at !== undefined && at > t) {
      const until = Math.min(at, next)
      add(tally, `${prefix}wait: its projection reaches the sequence`, until - t, until === at ? 1 : 0)
      t = until
      if (until < next) continue
    } else {
      add(tally, `${prefix}service CPU and event-loop queueing`, next - t)
      t = next
    }
    need = undefined
  }
}

export interface ProfileRow {
  readonly piece: string
  /** Per step, averaged over the profiled steps. */
  readonly ms: number
  readonly roundTrips: number
  readonly share: number
}

/** Messages of one kind the tap saw while the profiled steps ran, pauses included, per step. */
export interface WireKind {
  readonly kind: string
  readonly perStep: number
}

export interface StepProfile {
  readonly steps: number
  /**
   * Every message on the wire while the steps ran, by kind (a stored event counts once for its append and once for
   * each consumer it is delivered to): what the services exchange with NATS for a step and beside it.
   */
  readonly wire: ReadonlyArray<WireKind>
  /** Mean step time (the whole loop but the pause). */
  readonly stepMs: number
  readonly rows: ReadonlyArray<ProfileRow>
  /** Each call: how many a step makes, their mean time per step, and its pieces (per step). */
  readonly calls: ReadonlyArray<{
    readonly call: string
    readonly count: number
    readonly ms: number
    readonly pieces: ReadonlyArray<ProfileRow>
  }>
}

const rowsOf = (tally: Tally, steps: number, total: number): ProfileRow[] =>
  [...tally.entries()]
    .map(([piece, t]) => ({
      piece,
      ms: Number((t.ms / steps).toFixed(3)),
      roundTrips: Number((t.count / steps).toFixed(2)),
      share: total > 0 ? Number((t.ms / total).toFixed(4)) : 0,
    }))
    .filter((r) => r.ms >= 0.005 || r.roundTrips > 0)
    .sort((a, b) => b.ms - a.ms)

const WIRE_KINDS: ReadonlyArray<readonly [string, RegExp]> = [
  ["API requests", /^wm\.(api|route)\./],
  ["events: appends and their deliveries to consumers", /^wm\.evt\./],
  ["log reads: message get", /^\$JS\.API\.STREAM\.MSG\.GET\./],
  ["log reads: direct get", /^\$JS\.API\.DIRECT\.GET\./],
  ["stream info", /^\$JS\.API\.STREAM\.INFO\./],
  ["consumer pulls", /^\$JS\.API\.CONSUMER\.MSG\.NEXT\./],
  ["other JetStream API requests", /^\$JS\.API\./],
  ["JetStream advisories (the server's own)", /^\$JS\.EVENT\./],
  ["request ledger (KV)", /^\$KV\.wm_requests\./],
  ["content keys (KV)", /^\$KV\.wm_keys\./],
  ["leases, heartbeats and progress reports (KV)", /^\$KV\.wm_leases\./],
  ["other KV", /^\$KV\./],
  ["replies, consumer heartbeats and other inbox messages", /^_INBOX\./],
]

/** The tap's messages from `from` to `to` by kind, per step. */
const wireKinds = (messages: ReadonlyArray<WireMessage>, from: number, to: number, steps: number): WireKind[] => {
  const counts = new Map<string, number>()
  for (const m of messages) {
    if (m.t < from || m.t > to) continue
    const kind = WIRE_KINDS.find(([, pattern]) => pattern.test(m.subject))?.[0] ?? "other"
    counts.set(kind, (counts.get(kind) ?? 0) + 1)
  }
  return [...counts]
    .map(([kind, n]) => ({ kind, perStep: Number((n / steps).toFixed(1)) }))
    .sort((a, b) => b.perStep - a.perStep)
}

/** The profile of `steps`, from what the tap saw while they ran. */
export const profileSteps = (
  steps: ReadonlyArray<TimedStep>,
  messages: ReadonlyArray<WireMessage>,
  listeners: Listeners,
  client: string,
): StepProfile => {
  const owner = ownerOf(listeners)
  const { spans, deliveries } = parseWire(messages, owner)
  const tally: Tally = new Map()
  const perCall = new Map<string, { ms: number; count: number; tally: Tally }>()
  let total = 0
  for (const step of steps) {
    total += step.end - step.start
    let previous = step.start
    for (const call of step.calls) {
      add(tally, "client: between calls", call.start - previous)
      previous = call.end
      const pc = perCall.get(call.call) ?? { ms: 0, count: 0, tally: new Map() }
      pc.ms += call.end - call.start
      pc.count++
      perCall.set(call.call, pc)
      const request = spans.find(
        (s) => s.requester === client && s.start >= call.start && s.start <= call.end && s.kind.startsWith("api "),
      )
      const pieces: Tally = new Map()
      if (request === undefined) add(pieces, "not seen on the wire", call.end - call.start)
      else {
        // The tap may see the reply after the client has it.
        const end = Math.min(request.end, call.end)
        add(
          pieces,
          "client ↔ service transit (request and reply hops)",
          call.end - call.start - (end - request.start),
          1,
        )
        attribute(
          pieces,
          "",
          SERVICE_OF_CALL[call.call] ?? "?",
          request.start,
          end,
          request.afterSeq,
          call.call !== "record",
          spans,
          deliveries,
        )
      }
      for (const [piece, t] of pieces) {
        add(tally, piece, t.ms, t.count)
        add(pc.tally, piece, t.ms, t.count)
      }
    }
    add(tally, "client: between calls", step.end - previous)
  }
  const n = Math.max(1, steps.length)
  const window =
    steps.length === 0
      ? { from: 0, to: -1 }
      : { from: Math.min(...steps.map((s) => s.start)), to: Math.max(...steps.map((s) => s.end)) }
  return {
    steps: steps.length,
    wire: wireKinds(messages, window.from, window.to, n),
    stepMs: Number((total / n).toFixed(3)),
    rows: rowsOf(tally, n, total),
    calls: [...perCall.entries()].map(([call, c]) => ({
      call,
      count: c.count / n,
      ms: Number((c.ms / n).toFixed(3)),
      pieces: rowsOf(c.tally, n, total),
    })),
  }
}

/** A V8 CPU profile (the .cpuprofile format). */
export interface CpuProfile {
  readonly nodes: ReadonlyArray<{
    readonly id: number
    readonly callFrame: { readonly url: string; readonly functionName: string }
    readonly children?: ReadonlyArray<number>
  }>
  readonly samples: ReadonlyArray<number>
  readonly timeDeltas: ReadonlyArray<number>
  readonly startTime: number
  readonly endTime: number
}

export interface CpuRow {
  /** The file of this repository nearest the sample on its stack, else what ran (a library, GC, idle). */
  readonly where: string
  readonly ms: number
  readonly share: number
}

const libraryOf = (url: string, functionName: string): string => {
  if (functionName === "(idle)") return "(idle)"
  if (functionName === "(garbage collector)") return "(garbage collector)"
  if (functionName === "(program)") return "(program: V8 and native code)"
  if (url.includes("cpu-profile-probe")) return "(the profiler itself)"
  const lib = /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url)
  if (lib !== null) return `library: ${lib[1]}`
  if (url.startsWith("node:") || url === "") return "Node.js internals"
  return url
}

/** The profile's nodes by id, and each node's caller. */
const callTree = (profile: CpuProfile) => {
  const parent = new Map<number, number>()
  const byId = new Map(profile.nodes.map((n) => [n.id, n]))
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id)
  return { byId, parent }
}

/** A frame's file in this repository (its path from the root), undefined for a library's, Node's or the profiler's. */
const repoFileOf = (url: string, repoRoot: string): string | undefined => {
  const path = url.startsWith("file://") ? url.slice(7) : url
  if (!path.startsWith(repoRoot) || path.includes("/node_modules/") || path.includes("cpu-profile-probe"))
    return undefined
  return path.slice(repoRoot.length)
}

/**
 * Where the main thread's time went: each sample is given to the file of this repository nearest the
 * running function on its stack (services/…, domain/…, contracts/…), so a library's time counts for
 * the code that called it; a sample with none of ours on its stack is given to what ran.
 */
export const summariseCpuProfile = (profile: CpuProfile, repoRoot: string, top = 14): ReadonlyArray<CpuRow> => {
  const { byId, parent } = callTree(profile)
  const ours = (url: string) => repoFileOf(url, repoRoot)
  const label = new Map<number, string>()
  const labelOf = (id: number): string => {
    const known = label.get(id)
    if (known !== undefined) return known
    let found: string | undefined
    for (let at: number | undefined = id; at !== undefined && found === undefined; at = parent.get(at))
      found = ours(byId.get(at)?.callFrame.url ?? "")
    const node = byId.get(id)!
    const out = found ?? libraryOf(node.callFrame.url, node.callFrame.functionName)
    label.set(id, out)
    return out
  }
  const micros = new Map<string, number>()
  profile.samples.forEach((id, i) => {
    const where = labelOf(id)
    micros.set(where, (micros.get(where) ?? 0) + (profile.timeDeltas[i] ?? 0))
  })
  const total = Math.max(1, profile.endTime - profile.startTime)
  const rows = [...micros.entries()]
    .map(([where, us]) => ({ where, ms: us / 1_000, share: us / total }))
    .sort((a, b) => b.ms - a.ms)
  const shown = rows.slice(0, top)
  const rest = rows.slice(top)
  if (rest.length > 0)
    shown.push({
      where: `${rest.length} other files and libraries`,
      ms: rest.reduce((s, r) => s + r.ms, 0),
      share: rest.reduce((s, r) => s + r.share, 0),
    })
  return shown
}

/** What the services' main thread did while one kind of call was in flight, in ms a step, by piece. */
export interface CallCpu {
  readonly call: string
  /** The calls' time in flight a step, as the client measured it. */
  readonly inFlightMs: number
  readonly pieces: ReadonlyArray<{ readonly piece: string; readonly ms: number }>
}

const RECALL_FILES = new Set(
  ["cue-recall.ts", "rank.ts", "cue-forms.ts", "cue-writes.ts", "recalled-records.ts"].map(
    (f) => `services/memory/retrieval/${f}`,
  ),
)
const BACKGROUND_FILES = new Set([
  "services/platform/scheduling/requests-first.ts",
  "services/platform/embedding/offline-embedder.ts",
  "services/memory/retrieval/reactions.ts",
])
/**
 * The pieces a sample is given to, the first whose test its stack (files of this repository and the running
 * function) passes: a sample of the recall is the recall's whatever it calls, one under a delivery of the log
 * is the projections', and so on.
 */
const CALL_CPU_PIECES: ReadonlyArray<readonly [string, (files: ReadonlyArray<string>, leaf: string) => boolean]> = [
  ["idle (waiting for a reply or a delivery)", (_, leaf) => leaf === "(idle)"],
  ["garbage collector", (_, leaf) => leaf === "(garbage collector)"],
  ["the recall (ranking, choosing and reading its cues)", (files) => files.some((f) => RECALL_FILES.has(f))],
  [
    "background work (fading, embedding new entries, the memory service's reactions)",
    (files) => files.some((f) => BACKGROUND_FILES.has(f) || f.startsWith("services/fade/")),
  ],
  [
    "the log's records applied by the process's projections",
    (files) =>
      files.some((f) => f === "services/platform/log/shared-follow.ts" || f.startsWith("services/memory/longterm/")),
  ],
  ["socket writes", (_, leaf) => leaf === "writeBuffer" || leaf === "writev"],
  ["sealing and opening content", (files) => files.some((f) => f.startsWith("services/platform/keys/"))],
  [
    "the request's own handling (decide, append, ledger)",
    (files) => files.some((f) => f.startsWith("services/") || f.startsWith("domain/") || f.startsWith("contracts/")),
  ],
]
const OTHER_CPU = "runtime and libraries with none of ours on the stack (Effect, the NATS client, Node.js)"

/**
 * Where the services' main thread spent the time each kind of call was in flight: the CPU profile's samples
 * that fall inside the calls' windows (the client's clock moved onto the profile's, both monotonic), each given
 * to a piece by its stack (a request resumed by a projection reaching the sequence it waited for is the
 * request's, not the projection's). Work a call set off that runs after it answered (fading its records, say) is
 * counted in the call it delays.
 */
export const cpuInCalls = (
  profile: CpuProfile,
  steps: ReadonlyArray<TimedStep>,
  /** The profile's clock (µs) minus the client's performance.now() in µs. */
  offsetUs: number,
  repoRoot: string,
): ReadonlyArray<CallCpu> => {
  const { byId, parent } = callTree(profile)
  const pieceOfNode = new Map<number, string>()
  const pieceOf = (id: number): string => {
    const known = pieceOfNode.get(id)
    if (known !== undefined) return known
    const files: string[] = []
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
      const file = repoFileOf(byId.get(at)?.callFrame.url ?? "", repoRoot)
      // A request waiting for a projection to reach a sequence resumes inside the delivery that reached it: what
      // runs above the gate is the request's.
      if (file === "services/platform/log/sequence-gate.ts") break
      if (file !== undefined) files.push(file)
    }
    const leaf = byId.get(id)?.callFrame.functionName ?? ""
    const piece = CALL_CPU_PIECES.find(([, test]) => test(files, leaf))?.[0] ?? OTHER_CPU
    pieceOfNode.set(id, piece)
    return piece
  }
  const windows = steps
    .flatMap((s) =>
      s.calls.map((c) => ({ call: c.call, from: c.start * 1_000 + offsetUs, to: c.end * 1_000 + offsetUs })),
    )
    .sort((a, b) => a.from - b.from)
  const byCall = new Map<string, { inFlightUs: number; pieces: Map<string, number> }>()
  for (const w of windows) {
    const c = byCall.get(w.call) ?? { inFlightUs: 0, pieces: new Map() }
    c.inFlightUs += w.to - w.from
    byCall.set(w.call, c)
  }
  // A step's calls follow one another, so the windows do not overlap: one pass over the samples in time order.
  let t = profile.startTime
  let next = 0
  profile.samples.forEach((id, i) => {
    t += profile.timeDeltas[i] ?? 0
    const us = profile.timeDeltas[i + 1] ?? 0
    while (next < windows.length && windows[next]!.to < t) next++
    const w = windows[next]
    if (w === undefined || t < w.from) return
    const pieces = byCall.get(w.call)!.pieces
    const piece = pieceOf(id)
    pieces.set(piece, (pieces.get(piece) ?? 0) + us)
  })
  const n = Math.max(1, steps.length)
  const perStep = (us: number) => Number((us / 1_000 / n).toFixed(2))
  return [...byCall.entries()].map(([call, c]) => ({
    call,
    inFlightMs: perStep(c.inFlightUs),
    pieces: [...c.pieces.entries()].sort((a, b) => b[1] - a[1]).map(([piece, us]) => ({ piece, ms: perStep(us) })),
  }))
}
