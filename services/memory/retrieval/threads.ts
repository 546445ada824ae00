/**
 * A thread: every entry of a correlation id, both tiers, of the caller and the agents that share a tenant
 * with it (AgentSharing), never anyone else's. Each partition's part comes from the replica that answers
 * for it: this one's from its views and the long-term store, another's asked of that replica over the peer
 * protocol (thread-parts.ts), which this replica also answers for its own partitions.
 */
import { Effect, HashMap, type Scope } from "effect"
import type { RequestOf, ResponseOf } from "../../../contracts/api.ts"
import type { ApiError } from "../../../contracts/errors.ts"
import { partitionOf } from "../../../contracts/partitions.ts"
import { ALL_THREAD_PARTS, threadPartSubject } from "../../../contracts/subjects.ts"
import { type AgentView, fullestForm } from "../../../domain/agent-view.ts"
import type { AgentSharingShape } from "../../platform/access/sharing.ts"
import { askPeer, servePeerRequests } from "../../platform/api/peer.ts"
import { encodeError } from "../../platform/api/serve.ts"
import type { Nats } from "../../platform/nats/connection.ts"
import type { LongTermStoreShape } from "../longterm/store.ts"
import { decodeThreadPartReply, decodeThreadPartRequest, PEER_WAIT_MS } from "./thread-parts.ts"

type ThreadEntry = ResponseOf<"thread">["entries"][number]

export interface ThreadSources {
  readonly view: (agentId: string) => AgentView | undefined
  /** This replica answers for the agent's partition now. */
  readonly owns: (agentId: string) => boolean
  /** Both tiers have applied `afterSeq` for the agent's partition (or the read is refused). */
  readonly caughtUpTo: (afterSeq: number, agentId: string) => Effect.Effect<void, ApiError>
  readonly store: LongTermStoreShape
  readonly sharing: AgentSharingShape
}

export const makeThreads = (sources: ThreadSources) => {
  /** The thread's entries of these agents, all of one partition this replica answers for. */
  const part = (agents: ReadonlyArray<string>, correlationId: string, afterSeq: number | undefined) =>
    Effect.gen(function* () {
      if (afterSeq !== undefined) yield* sources.caughtUpTo(afterSeq, agents[0]!)
      const of = new Set(agents)
      const entries: ThreadEntry[] = []
      for (const agentId of agents) {
        const view = sources.view(agentId)
        if (view === undefined) continue
        for (const e of HashMap.values(view.entries)) {
          if (e.correlationId !== correlationId) continue
          entries.push({
            agentId,
            entryId: e.id,
            tier: "working",
            timestamp: e.timestamp,
            origin: e.origin,
            ...fullestForm(e),
          })
        }
      }
      for (const r of yield* sources.store.list({ correlationId }).pipe(Effect.orDie)) {
        if (!of.has(r.agentId)) continue
        if (entries.some((e) => e.agentId === r.agentId && e.entryId === r.entryId)) continue
        entries.push({
          agentId: r.agentId,
          entryId: r.entryId,
          tier: "long-term",
          timestamp: r.timestamp,
          origin: r.origin,
          form: r.summaryForm,
          text: r.summary,
        })
      }
      return entries
    })

  /** The part of a thread another replica holds: asked of whichever replica answers for the partition. */
  const partOfPeer = (partition: number, agents: ReadonlyArray<string>, request: RequestOf<"thread">) =>
    askPeer(
      threadPartSubject(partition),
      { agents, correlationId: request.correlationId, afterSeq: request.afterSeq },
      {
        timeoutMs: PEER_WAIT_MS,
        unanswered: `no memory replica answers for partition ${partition} now (it is moving)`,
      },
    ).pipe(Effect.flatMap(decodeThreadPartReply))

  const thread = Effect.fn("Retrieval.thread")(function* (agentId: string, request: RequestOf<"thread">) {
    const byPartition = new Map<number, string[]>()
    for (const id of sources.sharing.visibleTo(agentId)) {
      const p = partitionOf(id)
      byPartition.set(p, [...(byPartition.get(p) ?? []), id])
    }
    const parts = yield* Effect.forEach(
      [...byPartition],
      ([partition, agents]) =>
        sources.owns(agents[0]!)
          ? part(agents, request.correlationId, request.afterSeq)
          : partOfPeer(partition, agents, request),
      { concurrency: "unbounded" },
    )
    const entries = parts.flat()
    return { entries: entries.sort((a, b) => a.timestamp - b.timestamp || (a.entryId < b.entryId ? -1 : 1)) }
  })

  /** The part of a thread another replica asks of this one: answered only for a partition this replica owns. */
  const servePeerParts: Effect.Effect<void, never, Nats | Scope.Scope> = servePeerRequests(
    ALL_THREAD_PARTS,
    "wm.peer.memory.thread",
    (subject, data) => {
      const partition = Number(subject.slice(subject.lastIndexOf(".") + 1))
      const asked = decodeThreadPartRequest(data)
      if (asked === null || asked.agents.some((id) => partitionOf(id) !== partition)) return null
      if (!asked.agents.every(sources.owns)) return null
      return {
        attributes: { "wm.partition": partition },
        reply: part(asked.agents, asked.correlationId, asked.afterSeq).pipe(
          Effect.match({
            onSuccess: (entries) => ({ ok: true, entries }),
            onFailure: (error) => ({ ok: false, error: encodeError(error) }),
          }),
          // Given up while it ran: the asker's timeout sends it to the new owner.
          Effect.map((reply) => (asked.agents.every(sources.owns) ? reply : undefined)),
        ),
      }
    },
  )

  return { thread, servePeerParts }
}
