/**
 * The substrate: the raw text and metadata of every entry ever recorded,
 * readable by id at any time — working, faded or long since demoted.
 *
 * It keeps no store of its own: every entry's EntryRecorded is the first
 * message on the entry's subject in the event log, which keeps every event,
 * so `getRaw` reads that message (services/platform/substrate-reader.ts).
 * The service is a stateless reader in its queue group: it follows no log
 * and writes nothing on the ingest path, any number of replicas share the
 * requests, and a restarted replica answers at once. A forget erases the
 * entry's messages from the log, after which the entry reads as unknown.
 *
 * Versions before this kept a copy of every record in the `wm_substrate` KV
 * bucket; it is no longer written, and the forget eraser beside this service
 * still erases forgotten records from it while it exists (services/substrate/eraser.ts).
 */
import { Context, Effect, Layer } from "effect"
import type { RequestOf } from "../../contracts/api.ts"
import { NotCaughtUp, type Unavailable, UnknownEntries } from "../../contracts/errors.ts"
import { serveOperation } from "../platform/api/serve.ts"
import { ContentKeys } from "../platform/keys/content-keys.ts"
import { EventLog } from "../platform/log/event-log.ts"
import { Nats } from "../platform/nats/connection.ts"
import { readSubstrate, type SubstrateRecord } from "../platform/substrate-reader.ts"

export interface SubstrateShape {
  readonly get: (agentId: string, entryId: string) => Effect.Effect<SubstrateRecord | null>
}

export class Substrate extends Context.Service<Substrate, SubstrateShape>()("wm/Substrate") {
  static readonly make = Effect.gen(function* () {
    const { jsm } = yield* Nats
    const keys = yield* ContentKeys
    const log = yield* EventLog

    // An entry not found after a position the log has not reached is "not yet", not "unknown". The log
    // holds every acknowledged write, so `afterSeq` is reached once the stream's end is at or past it.
    const notFound = (
      entryId: string,
      afterSeq: number | undefined,
    ): Effect.Effect<never, NotCaughtUp | UnknownEntries | Unavailable> =>
      afterSeq === undefined
        ? Effect.fail(new UnknownEntries({ entryIds: [entryId] }))
        : Effect.flatMap(log.lastSeq, (appliedSeq) =>
            Effect.fail(
              appliedSeq < afterSeq
                ? new NotCaughtUp({ afterSeq, appliedSeq })
                : new UnknownEntries({ entryIds: [entryId] }),
            ),
          )

    const getRaw = Effect.fn("Substrate.getRaw")((agentId: string, request: RequestOf<"getRaw">) =>
      readSubstrate(jsm, keys, agentId, request.entryId).pipe(
        Effect.flatMap((record) =>
          record !== null ? Effect.succeed(record) : notFound(request.entryId, request.afterSeq),
        ),
      ),
    )

    yield* serveOperation("getRaw", getRaw)

    return { get: (agentId, entryId) => readSubstrate(jsm, keys, agentId, entryId) } satisfies SubstrateShape
  })

  static readonly layer = Layer.effect(Substrate, Substrate.make)
}
