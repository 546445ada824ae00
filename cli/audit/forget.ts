/**
 * A verifiable forget, intent first: the tombstone (EntryForgotten or
 * AgentForgotten, decided by `decideForget`) is stored before anything is
 * erased, so whatever fails afterwards, the forget is on record and the
 * eraser beside the substrate finishes it. Then the erasure, as the eraser
 * does it (services/platform/log/erase.ts): the log records are erased in place,
 * every durable projection confirms it applied the tombstone (erasing what
 * its store held), and the dead letters of the forgotten records are erased.
 *
 * Running it again for a forget already recorded writes nothing new and
 * resumes the erasure. An agent that is not registered, or an entry the
 * agent does not hold, is refused and nothing is written.
 */
import { JetStreamApiError, jetstream } from "@nats-io/jetstream"
import { errors, type NatsConnection } from "@nats-io/transport-node"
import { agentEvents, entrySubject, eventSubject } from "../../contracts/subjects.ts"
import { type AgentView, evolve } from "../../domain/agent-view.ts"
import type { DecisionError } from "../../domain/decision.ts"
import { type EntryFacts, factAfter, factOf, NO_ENTRY_FACTS } from "../../domain/entry-standing.ts"
import { decideForget, type Tombstone } from "../../domain/forget.ts"
import { completeErasure, type ErasureReport } from "../../services/platform/log/erase.ts"
import { scanLog } from "./log.ts"

export interface Forgotten extends ErasureReport {
  /** Log records erased by this run (kept under its former name). */
  readonly purged: number
  /** False when the tombstone was already stored and this run resumed its erasure. */
  readonly recorded: boolean
}

/** The forget was refused; nothing was written. */
export class ForgetRefused extends Error {
  override readonly name = "ForgetRefused"
  readonly error: DecisionError
  constructor(error: DecisionError) {
    super(error.message)
    this.error = error
  }
}

interface AgentState {
  readonly view: AgentView | undefined
  /** The latest tombstone for what is asked, when one is stored and not overtaken by a re-registration. */
  readonly tombstone: { readonly event: Tombstone; readonly seq: number } | null
  /** Where the entry asked for stands, from the last record on its subject (none when the agent is asked for). */
  readonly known: EntryFacts
}

const readAgent = async (nc: NatsConnection, agentId: string, entryId: string | undefined): Promise<AgentState> => {
  let view: AgentView | undefined
  let tombstone: AgentState["tombstone"] = null
  let known = NO_ENTRY_FACTS
  const subject = entryId === undefined ? null : entrySubject(agentId, entryId)
  await scanLog(nc, { filter: agentEvents(agentId) }, (record) => {
    const event = record.event
    if (entryId !== undefined && record.subject === subject) {
      // A record that does not decode moves the subject's position, not where the entry stands.
      const before = factOf(known, entryId)
      known = new Map([
        [entryId, event !== null ? factAfter(event, record.seq, record.seq) : { ...before, subjectSeq: record.seq }],
      ])
    }
    if (event === null) return
    view = evolve(view, event, { seq: record.seq })
    if (entryId === undefined) {
      if (event._tag === "AgentForgotten") tombstone = { event, seq: record.seq }
      else if (event._tag === "AgentRegistered") tombstone = null
    } else if (event._tag === "EntryForgotten" && event.entryId === entryId) tombstone = { event, seq: record.seq }
    else if (event._tag === "AgentRegistered" || (event._tag === "EntryRecorded" && event.entryId === entryId))
      tombstone = null
  })
  return { view, tombstone, known }
}

const PUBLISH_DEADLINE_MS = 30_000

/** Stores the tombstone, retrying with the same message id (stored once) until the deadline. */
const storeTombstone = async (nc: NatsConnection, tombstone: Tombstone): Promise<number> => {
  const js = jetstream(nc)
  const deadline = Date.now() + PUBLISH_DEADLINE_MS
  for (let pause = 100; ; pause = Math.min(2_000, pause * 2)) {
    try {
      return (
        await js.publish(eventSubject(tombstone), JSON.stringify(tombstone), {
          msgID: tombstone.eventId,
          timeout: 5_000,
        })
      ).seq
    } catch (error) {
      const final =
        error instanceof errors.PermissionViolationError ||
        (error instanceof JetStreamApiError && error.status !== 503 && error.status !== 408)
      if (final || Date.now() > deadline) throw error
      await new Promise((r) => setTimeout(r, pause))
    }
  }
}

export const forget = async (
  nc: NatsConnection,
  agentId: string,
  entryId?: string,
  options: { readonly waitMs?: number } = {},
): Promise<Forgotten> => {
  const state = await readAgent(nc, agentId, entryId)
  let tombstone = state.tombstone
  let recorded = false
  if (tombstone === null) {
    const at = Date.now()
    const decision = decideForget(
      state.view,
      entryId !== undefined ? { entryId } : {},
      {
        eventId: `${agentId}:forget:${entryId ?? "agent"}:${at}`,
        agentId,
        at,
        causationId: "operator:forget",
        correlationId: null,
      },
      state.known,
    )
    if (!decision.ok) throw new ForgetRefused(decision.error)
    tombstone = { event: decision.event, seq: await storeTombstone(nc, decision.event) }
    recorded = true
  }
  const report = await completeErasure(nc, tombstone.event, tombstone.seq, { waitMs: options.waitMs ?? 30_000 })
  return { ...report, purged: report.erasedEvents, recorded }
}
