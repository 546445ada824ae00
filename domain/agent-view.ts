/**
 * The working view of one agent and the reducer that folds events into it.
 *
 * `evolve` is pure: it never mutates its input, reads no clock and does no
 * I/O, so the same events always give the same view: live, rebuilt from the
 * log, replayed to an instant for an audit, or mirrored in an SDK.
 */
import { HashMap, HashSet, Option } from "effect"
import type { AgentConfig } from "../contracts/agent.ts"
import type { RepresentationKind, WorkingEntry, WorkingRung } from "../contracts/entry.ts"
import { type EventOf, entryIdOf, type MemoryEvent } from "../contracts/events.ts"
import type { Focus } from "../contracts/focus.ts"
import { agentConfigSubject, agentStepSubject, entrySubject, eventSubject } from "../contracts/subjects.ts"

export interface OpenStep {
  readonly stepId: string
  readonly focus: Focus | null
  readonly startedAt: number
  /** Stream sequence of the StepStarted event: what a retried begin of this step is answered with. */
  readonly startedSeq: number
  /** Ids of the entries and cues the agent referenced in this step. */
  readonly referenced: HashSet.HashSet<string>
  /** Retrieval's similarity of working entries to the step's focus, once recalled. */
  readonly similarities: HashMap.HashMap<string, number> | null
  /** Entries forgotten while the step is open (absent: none): no cue of the step brings them back. */
  readonly forgotten?: HashSet.HashSet<string>
}

export interface AgentView {
  /** As registered, with the base budget (`baseBudget`) as last retuned. */
  readonly config: AgentConfig
  /** The budget in force: the base budget, expanded during hyperfocus. */
  readonly budgetInForce: number
  readonly hyperfocus: boolean
  /**
   * Native working entries, rungs 0-2. Entries that left working (long-term,
   * forgotten) are not kept, so a view is bounded by the budget, not by the
   * agent's history: where such an entry stands is read from its subject in
   * the log when a decision needs it (entry-standing.ts).
   */
  readonly entries: HashMap.HashMap<string, WorkingEntry>
  /** Transient cues rehydrated from long-term (or for a summarised entry, its raw text) for the open step. */
  readonly cues: HashMap.HashMap<string, WorkingEntry>
  /** The relevance each cue was recalled with. */
  readonly cueRelevance: HashMap.HashMap<string, number>
  /** Tokens working carries: each native entry at the cost of its current rung. */
  readonly usage: number
  readonly step: OpenStep | null
  readonly focus: Focus | null
  readonly taskKind: string | null
  /** Entries recorded so far; an entry's `ordinal` is this counter when it was recorded. */
  readonly entryCount: number
  /** The latest entry timestamp seen: the agent's own clock, which also runs for imported history. */
  readonly clock: number
  /** Sequence of the last event on the agent's configuration subject (guards budget changes). */
  readonly configSeq: number
  /** Sequence of the last event on the agent's step subject (guards steps, focus, reads and references). */
  readonly stepSeq: number
  /** Sequence of the AgentRegistered event: one registration of this id (it may be registered again after a forget). */
  readonly registeredSeq: number
  readonly lastSeq: number
  readonly lastEventAt: number
  /** Hashes of the ids of the events applied most recently (at least the last SEEN_IDS), so a copy stored under another message id is not applied twice. */
  readonly seen: SeenIds
}

/** Where an event sits in the log. */
export interface LogPosition {
  readonly seq: number
}

/** The cost of an entry at its current rung: what working must carry for it. */
export const rungCost = (entry: WorkingEntry): number => {
  switch (entry.rung) {
    case 0:
      return entry.tokens.raw
    case 1:
      return entry.tokens.keyPoints ?? entry.tokens.raw
    case 2:
      return entry.tokens.summary ?? entry.tokens.keyPoints ?? entry.tokens.raw
  }
}

/** The forms working holds for an entry, highest fidelity first. */
export const availableForms = (entry: WorkingEntry): ReadonlyArray<RepresentationKind> => {
  const forms: RepresentationKind[] = []
  if (entry.content !== null) forms.push("raw")
  if (entry.keyPoints !== null) forms.push("keyPoints")
  if (entry.summary !== null) forms.push("summary")
  return forms
}

export const formText = (entry: WorkingEntry, form: RepresentationKind): string => {
  switch (form) {
    case "raw":
      return entry.content ?? ""
    case "keyPoints":
      return entry.keyPoints ?? ""
    case "summary":
      return entry.summary ?? ""
  }
}

/** The fullest text working holds for an entry, and its form: the raw text, else key points, else the summary. */
export const fullestForm = (entry: WorkingEntry): { readonly form: RepresentationKind; readonly text: string } =>
  entry.content !== null
    ? { form: "raw", text: entry.content }
    : entry.keyPoints !== null
      ? { form: "keyPoints", text: entry.keyPoints }
      : { form: "summary", text: entry.summary ?? "" }

export const fullestText = (entry: WorkingEntry): string => fullestForm(entry).text

export const formTokens = (entry: WorkingEntry, form: RepresentationKind): number =>
  (form === "raw" ? entry.tokens.raw : entry.tokens[form]) ?? entry.tokens.raw

/** The agent's base budget: what it registered with or was retuned to, before any hyperfocus expansion. */
export const baseBudget = (view: AgentView): number => view.config.budget

/** The focus relevance is measured against: the open step's, else the agent's. */
export const currentFocus = (view: AgentView): Focus | null => view.step?.focus ?? view.focus

/**
 * Whether a context built on this view holds the open step's recall from long-term: none is asked without a
 * focused step; a focused step's recall is in the view once its `StepRecalled` is.
 */
export const recallOf = (view: AgentView): "served" | "unavailable" | "none" =>
  view.step === null || currentFocus(view) === null
    ? "none"
    : view.step.similarities !== null
      ? "served"
      : "unavailable"

const registered = (event: EventOf<"AgentRegistered">, position: LogPosition): AgentView => ({
  config: event.config,
  budgetInForce: event.config.budget,
  hyperfocus: false,
  entries: HashMap.empty(),
  cues: HashMap.empty(),
  cueRelevance: HashMap.empty(),
  usage: 0,
  step: null,
  focus: null,
  taskKind: null,
  entryCount: 0,
  clock: 0,
  configSeq: position.seq,
  stepSeq: 0,
  registeredSeq: position.seq,
  seen: remember(NO_SEEN_IDS, eventIdHash(event.eventId)),
  lastSeq: position.seq,
  lastEventAt: event.at,
})

const recorded = (view: AgentView, event: EventOf<"EntryRecorded">, seq: number): AgentView => {
  // An entry is recorded once: the record is appended only on an empty entry subject, and a copy of
  // the same event stored under another message id is caught by `seen`. A working entry is kept as is.
  if (HashMap.has(view.entries, event.entryId)) return view
  const entry: WorkingEntry = {
    id: event.entryId,
    timestamp: event.timestamp,
    origin: event.origin,
    content: event.content,
    correlationId: event.correlationId,
    tags: event.tags,
    moodSnapshot: event.moodSnapshot,
    rung: 0,
    referenceCount: 0,
    citationCount: 0,
    emotionalWeight: event.emotionalWeight,
    keyPoints: null,
    summary: null,
    tokens: { raw: event.tokens },
    lastEventSeq: seq,
    ordinal: view.entryCount,
    trackedSince: event.timestamp,
    lastReadAt: null,
    lastCitedAt: null,
    transient: false,
  }
  return {
    ...view,
    entries: HashMap.set(advisedEntries(view.entries, event), entry.id, entry),
    usage: view.usage + entry.tokens.raw,
    entryCount: view.entryCount + 1,
    clock: Math.max(view.clock, event.timestamp),
  }
}

/**
 * An advisor's weight covers what it speaks about: the working entries of its
 * correlation id take the advisor entry's emotional weight where it is higher
 * ("that constraint matters; do not lose it" keeps the constraint).
 */
const advisedEntries = (entries: AgentView["entries"], event: EventOf<"EntryRecorded">): AgentView["entries"] => {
  const { correlationId, emotionalWeight } = event
  if (event.origin !== "ADVISOR" || correlationId === null || emotionalWeight <= 0) return entries
  let next = entries
  for (const entry of HashMap.values(entries)) {
    if (entry.correlationId === correlationId && entry.emotionalWeight < emotionalWeight)
      next = HashMap.set(next, entry.id, { ...entry, emotionalWeight })
  }
  return next
}

const withEntry = (view: AgentView, entryId: string, update: (entry: WorkingEntry) => WorkingEntry): AgentView => {
  const current = HashMap.get(view.entries, entryId)
  if (Option.isNone(current)) return view
  const next = update(current.value)
  return {
    ...view,
    entries: HashMap.set(view.entries, entryId, next),
    usage: view.usage - rungCost(current.value) + rungCost(next),
  }
}

const rungChanged = (view: AgentView, event: EventOf<"RungChanged">, seq: number): AgentView =>
  withEntry(view, event.entryId, (entry) =>
    event.to === 1
      ? {
          ...entry,
          rung: 1,
          keyPoints: event.text,
          tokens: { ...entry.tokens, keyPoints: event.tokens },
          lastEventSeq: seq,
        }
      : {
          ...entry,
          rung: 2,
          // Working now carries only the summary; the raw text stays in the substrate.
          content: null,
          keyPoints: null,
          summary: event.text,
          tokens: { raw: entry.tokens.raw, summary: event.tokens },
          lastEventSeq: seq,
        },
  )

const demoted = (view: AgentView, event: EventOf<"EntryDemoted">): AgentView => {
  const current = HashMap.get(view.entries, event.entryId)
  if (Option.isNone(current)) return view
  return {
    ...view,
    entries: HashMap.remove(view.entries, event.entryId),
    usage: view.usage - rungCost(current.value),
  }
}

/** What a cue event (or one cue of a recall) carries of its entry. */
type RecalledCue = Pick<EventOf<"CueRehydrated">, "entryId" | "correlationId" | "recalled">

/** A working entry made from a record recalled from long-term. */
const fromRecalled = (view: AgentView, event: RecalledCue, seq: number, transient: boolean): WorkingEntry => {
  const r = event.recalled
  const kp = r.form === "raw" ? r.keyPoints : undefined
  const rung: WorkingRung = r.form === "raw" ? (kp ? 1 : 0) : r.form === "keyPoints" ? 1 : 2
  return {
    id: event.entryId,
    timestamp: r.timestamp,
    origin: r.origin,
    content: r.form === "raw" ? r.text : null,
    correlationId: event.correlationId,
    tags: r.tags,
    moodSnapshot: r.moodSnapshot,
    rung,
    referenceCount: 0,
    citationCount: 0,
    emotionalWeight: r.emotionalWeight,
    keyPoints: r.form === "keyPoints" ? r.text : (kp?.text ?? null),
    summary: r.form === "summary" ? r.text : null,
    tokens:
      r.form === "raw"
        ? kp
          ? { raw: r.tokens, keyPoints: kp.tokens }
          : { raw: r.tokens }
        : { raw: r.tokens, [r.form]: r.tokens },
    lastEventSeq: seq,
    ordinal: view.entryCount,
    trackedSince: Math.max(view.clock, r.timestamp),
    lastReadAt: null,
    lastCitedAt: null,
    transient,
  }
}

const promoted = (view: AgentView, event: EventOf<"CuePromoted">, seq: number): AgentView => {
  const existing = Option.getOrUndefined(HashMap.get(view.entries, event.entryId))
  // A native entry is replaced only by a higher-fidelity form of itself (its raw text recalled at rung 2).
  if (existing !== undefined && existing.rung < 2) return view
  const entry = fromRecalled(view, event, seq, false)
  return {
    ...view,
    entries: HashMap.set(view.entries, entry.id, entry),
    cues: HashMap.remove(view.cues, event.entryId),
    cueRelevance: HashMap.remove(view.cueRelevance, event.entryId),
    usage: view.usage - (existing ? rungCost(existing) : 0) + rungCost(entry),
    // Fresh fade tracking: the promoted entry counts as the newest.
    entryCount: view.entryCount + 1,
  }
}

const read = (view: AgentView, event: EventOf<"EntriesRead">): AgentView => {
  // One transient copy for the whole read: a read serves most of the view, and a copy of the map's path per entry was most of its garbage.
  const entries = HashMap.mutate(view.entries, (mutable) => {
    for (const item of event.served) {
      if (item.cue) continue
      HashMap.modify(mutable, item.entryId, (e) => ({
        ...e,
        referenceCount: e.referenceCount + 1,
        lastReadAt: event.at,
      }))
    }
  })
  return { ...view, entries }
}

const referenced = (view: AgentView, event: EventOf<"EntriesReferenced">): AgentView => {
  let entries = view.entries
  let step = view.step
  for (const id of event.entryIds) {
    // Citation time is on the agent's own clock, the one ages are measured against.
    entries = HashMap.modify(entries, id, (e) => ({
      ...e,
      citationCount: e.citationCount + 1,
      lastCitedAt: view.clock,
    }))
    if (step !== null && step.stepId === event.stepId) step = { ...step, referenced: HashSet.add(step.referenced, id) }
  }
  return { ...view, entries, step }
}

/**
 * Cues of the open step: each brings back what working no longer holds (a long-term record, or the raw text of a
 * summarised entry), unless its entry was forgotten during the step.
 */
const rehydrated = (
  view: AgentView,
  cues: ReadonlyArray<RecalledCue & { readonly relevance: number }>,
  seq: number,
): AgentView => {
  const forgotten = view.step?.forgotten
  const taken = cues.filter((cue) => {
    if (forgotten !== undefined && HashSet.has(forgotten, cue.entryId)) return false
    const native = Option.getOrUndefined(HashMap.get(view.entries, cue.entryId))
    return native === undefined || native.rung >= 2
  })
  if (taken.length === 0) return view
  return {
    ...view,
    cues: HashMap.mutate(view.cues, (m) => {
      for (const cue of taken) HashMap.set(m, cue.entryId, fromRecalled(view, cue, seq, true))
    }),
    cueRelevance: HashMap.mutate(view.cueRelevance, (m) => {
      for (const cue of taken) HashMap.set(m, cue.entryId, cue.relevance)
    }),
  }
}

const apply = (view: AgentView, event: MemoryEvent, seq: number): AgentView => {
  switch (event._tag) {
    case "AgentRegistered":
      return view
    case "BudgetChanged":
      return {
        ...view,
        config: { ...view.config, budget: event.baseBudget },
        budgetInForce: event.budget,
        configSeq: seq,
        hyperfocus:
          event.reason === "hyperfocus-enter" ? true : event.reason === "hyperfocus-exit" ? false : view.hyperfocus,
      }
    case "EntryRecorded":
      return recorded(view, event, seq)
    case "EntriesRead":
      return read(view, event)
    case "EntriesReferenced":
      return referenced(view, event)
    case "StepStarted":
      return {
        ...view,
        step: {
          stepId: event.stepId,
          focus: event.focus,
          startedAt: event.at,
          startedSeq: seq,
          referenced: HashSet.empty(),
          similarities: null,
        },
        // Cues live for one step only.
        cues: HashMap.empty(),
        cueRelevance: HashMap.empty(),
      }
    case "StepEnded":
      return view.step?.stepId === event.stepId
        ? { ...view, step: null, cues: HashMap.empty(), cueRelevance: HashMap.empty() }
        : view
    case "FocusChanged":
      return { ...view, focus: event.focus, taskKind: event.taskKind }
    case "RungChanged":
      return rungChanged(view, event, seq)
    case "EntryDemoted":
      return demoted(view, event)
    case "CueRehydrated":
      return view.step?.stepId === event.stepId ? rehydrated(view, [event], seq) : view
    case "CuesRehydrated":
      // A cue the step already holds keeps the form and relevance it came with (a recall for a task transition
      // decided beside another).
      return view.step?.stepId === event.stepId
        ? rehydrated(
            view,
            event.cues.filter((cue) => !HashMap.has(view.cues, cue.entryId)),
            seq,
          )
        : view
    case "StepRecalled":
      if (view.step?.stepId !== event.stepId) return view
      return {
        ...view,
        step: {
          ...view.step,
          similarities: HashMap.fromIterable(event.similarities.map((s) => [s.entryId, s.similarity] as const)),
        },
      }
    case "CuePromoted":
      return promoted(view, event, seq)
    case "CueDropped":
      // A drop names its step: appended after the step ended, it must not take the same entry's cue from a later step.
      if (view.step?.stepId !== event.stepId) return view
      return {
        ...view,
        cues: HashMap.remove(view.cues, event.entryId),
        cueRelevance: HashMap.remove(view.cueRelevance, event.entryId),
      }
    case "CuesDropped":
      if (view.step?.stepId !== event.stepId) return view
      return {
        ...view,
        cues: HashMap.removeMany(view.cues, event.entryIds),
        cueRelevance: HashMap.removeMany(view.cueRelevance, event.entryIds),
      }
    case "EntryForgotten": {
      const native = Option.getOrUndefined(HashMap.get(view.entries, event.entryId))
      // A recall decided before the forget and stored after it must not bring the entry back in this step.
      const step = view.step && {
        ...view.step,
        forgotten: HashSet.add(view.step.forgotten ?? HashSet.empty(), event.entryId),
      }
      return {
        ...view,
        step,
        entries: HashMap.remove(view.entries, event.entryId),
        cues: HashMap.remove(view.cues, event.entryId),
        cueRelevance: HashMap.remove(view.cueRelevance, event.entryId),
        usage: view.usage - (native ? rungCost(native) : 0),
      }
    }
    case "AgentForgotten":
      return view
  }
}

/**
 * Folds one event into an agent's view. Events before the agent's
 * registration, and events already applied (by sequence), change nothing;
 * after AgentForgotten there is no view (undefined).
 */
export const evolve = (
  view: AgentView | undefined,
  event: MemoryEvent,
  position: LogPosition,
): AgentView | undefined => {
  // A forgotten agent has no view at all.
  if (event._tag === "AgentForgotten") return undefined
  if (view === undefined) return event._tag === "AgentRegistered" ? registered(event, position) : undefined
  if (position.seq <= view.lastSeq) return view
  // A copy of an applied event stored again under another message id changes nothing but log positions.
  const hash = eventIdHash(event.eventId)
  const next = hasSeen(view.seen, hash)
    ? view
    : { ...apply(view, event, position.seq), lastEventAt: event.at, seen: remember(view.seen, hash) }
  return { ...atPosition(next, event, position.seq), lastSeq: position.seq }
}

/** Whether `evolve` applies this event to this view (not before it, not already applied, not a stored copy). */
export const applies = (view: AgentView | undefined, event: MemoryEvent, position: LogPosition): boolean =>
  view !== undefined && position.seq > view.lastSeq && !hasSeen(view.seen, eventIdHash(event.eventId))

/**
 * A record on one of the agent's subjects that no projection could decode
 * (dead-lettered): nothing applies, but the positions the expected-sequence
 * guards use move past it, so later decisions on that subject are not refused.
 */
export const skipUndecodable = (view: AgentView, subject: string, seq: number): AgentView => {
  if (subject === agentConfigSubject(view.config.id)) return seq > view.configSeq ? { ...view, configSeq: seq } : view
  if (subject === agentStepSubject(view.config.id)) return seq > view.stepSeq ? { ...view, stepSeq: seq } : view
  const prefix = entrySubject(view.config.id, "")
  return subject.startsWith(prefix) ? atEntrySubject(view, subject.slice(prefix.length), seq) : view
}

/**
 * The ids of recently applied events, kept as 53-bit hashes: the newest in a
 * short array copied when one is added (a check scans it; a list of nodes
 * scattered through the heap made every check a chase of pointers), older ones
 * in frozen generations of SEEN_GENERATION, each a sorted Float64Array searched
 * by bisection (about 7 KB per agent, measured by `npm run bench:memory`; sets
 * of the hashes took 19 KB, sets of the ids 115–186 KB). A retry is kept from
 * being applied twice at any age by the request ledger (it never reaches the
 * log again); this memory only catches a copy of an event that reached the log
 * under another message id.
 * Two different ids share a hash with a chance of about 2^-53 per pair.
 */
export interface SeenIds {
  /** The newest hashes, oldest first, fewer than SEEN_GENERATION + 1; never mutated once made. */
  readonly recent: Float64Array
  /** Frozen generations, newest first, each sorted ascending; never mutated once made. */
  readonly older: ReadonlyArray<Float64Array>
}

/** Hashes per generation. */
export const SEEN_GENERATION = 64
/** Event ids remembered per agent: at least this many (and at most one generation more). */
export const SEEN_IDS = 512
const SEEN_OLDER = SEEN_IDS / SEEN_GENERATION

const NO_SEEN_IDS: SeenIds = { recent: new Float64Array(0), older: [] }

/** How many event ids a view remembers. */
export const seenIdCount = (seen: SeenIds): number =>
  seen.recent.length + seen.older.reduce((n, generation) => n + generation.length, 0)

/** Two 32-bit FNV-1a variants of the id, joined into one safe integer. */
export const eventIdHash = (id: string): number => {
  let a = 0x811c9dc5
  let b = 0x01000193 ^ id.length
  for (let i = 0; i < id.length; i++) {
    const c = id.charCodeAt(i)
    a = Math.imul(a ^ c, 0x01000193)
    b = Math.imul(b ^ c, 0x5bd1e995)
    b ^= b >>> 15
  }
  return (a >>> 0) * 2 ** 21 + ((b >>> 0) >>> 11)
}

/** Whether a sorted generation holds the hash. */
const generationHas = (generation: Float64Array, hash: number): boolean => {
  let lo = 0
  let hi = generation.length - 1
  while (lo <= hi) {
    const mid = (lo + hi) >>> 1
    const at = generation[mid]!
    if (at === hash) return true
    if (at < hash) lo = mid + 1
    else hi = mid - 1
  }
  return false
}

const hasSeen = (seen: SeenIds, hash: number): boolean => {
  const recent = seen.recent
  for (let i = 0; i < recent.length; i++) if (recent[i] === hash) return true
  for (const generation of seen.older) if (generationHas(generation, hash)) return true
  return false
}

/** A frozen generation of the given hashes. */
export const seenGeneration = (hashes: Iterable<number>): Float64Array => Float64Array.from(hashes).sort()

const remember = (seen: SeenIds, hash: number): SeenIds => {
  if (seen.recent.length < SEEN_GENERATION) {
    const recent = new Float64Array(seen.recent.length + 1)
    recent.set(seen.recent)
    recent[seen.recent.length] = hash
    return { recent, older: seen.older }
  }
  return {
    recent: Float64Array.of(hash),
    older: [seenGeneration(seen.recent), ...seen.older.slice(0, SEEN_OLDER - 1)],
  }
}

/**
 * Keeps the positions the expected-sequence guards use equal to the last
 * event stored on their subject, whether or not the event changed anything.
 */
const atPosition = (view: AgentView, event: MemoryEvent, seq: number): AgentView => {
  if (event._tag === "AgentRegistered" || event._tag === "BudgetChanged")
    return view.configSeq === seq ? view : { ...view, configSeq: seq }
  const entryId = entryIdOf(event)
  if (entryId === null)
    return eventSubject(event) === agentStepSubject(view.config.id) && view.stepSeq < seq
      ? { ...view, stepSeq: seq }
      : view
  return atEntrySubject(view, entryId, seq)
}

/** A native entry carries the position of its subject; other entries' subjects are read from the log when written to. */
const atEntrySubject = (view: AgentView, entryId: string, seq: number): AgentView => {
  const entry = Option.getOrUndefined(HashMap.get(view.entries, entryId))
  if (entry === undefined || entry.lastEventSeq >= seq) return view
  return { ...view, entries: HashMap.set(view.entries, entryId, { ...entry, lastEventSeq: seq }) }
}

/** The sequence of the last event on a native entry's subject that this view has applied (null: not a native entry). */
export const nativeSubjectSeq = (view: AgentView, entryId: string): number | null =>
  Option.getOrUndefined(HashMap.get(view.entries, entryId))?.lastEventSeq ?? null

/**
 * The sequence an event's subject must still be at for a decision taken on
 * this view to stand (its Nats-Expected-Last-Subject-Sequence): the
 * configuration subject for registrations and budgets, the step subject for
 * steps, focus, reads and references, a native entry's subject for what
 * happens to it. Null for the subject of an entry the view does not hold
 * natively (in long-term, a cue, forgotten, unknown): the writer reads that
 * subject's last sequence from the log (`EntryFact.subjectSeq`).
 */
export const expectedSeqOf = (view: AgentView, event: MemoryEvent): number | null => {
  const entryId = entryIdOf(event)
  if (entryId !== null) return nativeSubjectSeq(view, entryId)
  return eventSubject(event) === agentConfigSubject(view.config.id) ? view.configSeq : view.stepSeq
}

/** Working entries in timestamp order (oldest first); ties keep recording order. */
export const entriesByTime = (entries: Iterable<WorkingEntry>): WorkingEntry[] =>
  Array.from(entries).sort((a, b) => a.timestamp - b.timestamp || a.ordinal - b.ordinal)

/** A plain, ordered, JSON-ready form of a view: what "the same view" means when two are compared. */
export const viewSnapshot = (view: AgentView) => ({
  config: view.config,
  budget: view.budgetInForce,
  hyperfocus: view.hyperfocus,
  usage: view.usage,
  step: view.step && {
    ...view.step,
    referenced: Array.from(view.step.referenced).sort(),
    similarities: view.step.similarities && Array.from(view.step.similarities).sort(),
    ...(view.step.forgotten !== undefined ? { forgotten: Array.from(view.step.forgotten).sort() } : {}),
  },
  focus: view.focus,
  taskKind: view.taskKind,
  entryCount: view.entryCount,
  clock: view.clock,
  lastSeq: view.lastSeq,
  entries: entriesByTime(HashMap.values(view.entries)),
  cues: entriesByTime(HashMap.values(view.cues)),
})

/** What `view.get` answers for a view: budget use, entries by rung, the entries (cues last), the open step. */
export const viewResponseOf = (view: AgentView, appliedSeq: number) => {
  const entries = entriesByTime(HashMap.values(view.entries))
  const byRung = { "0": 0, "1": 0, "2": 0 }
  for (const e of entries) byRung[e.rung] += 1
  return {
    agent: view.config,
    budget: view.budgetInForce,
    hyperfocus: view.hyperfocus,
    usage: view.usage,
    entriesByRung: byRung,
    step: view.step && { stepId: view.step.stepId, focus: view.step.focus },
    focus: view.focus,
    entries: [...entries, ...entriesByTime(HashMap.values(view.cues))],
    appliedSeq,
  }
}
