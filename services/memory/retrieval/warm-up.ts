/**
 * A warm-up: the agent's most recently demoted long-term records that working does not hold are promoted
 * back to native working entries, in their key points where they have them, else their summaries. With a
 * request id it runs once, and a retry is answered as it was.
 */
import { Clock, Effect, HashMap } from "effect"
import type { RequestOf } from "../../../contracts/api.ts"
import type { Recalled } from "../../../domain/cue-decide.ts"
import { recalledMeta } from "../../../domain/cue-plan.ts"
import type { CommandHandler } from "../../platform/log/command-handler.ts"
import type { LongTermStoreShape } from "../longterm/store.ts"
import type { CaughtUpReads } from "./caught-up.ts"
import type { CueWrites } from "./cue-writes.ts"
import type { RetrievalSettingsShape } from "./settings.ts"

export interface WarmUpDependencies {
  readonly settings: RetrievalSettingsShape
  readonly store: LongTermStoreShape
  readonly commands: CommandHandler
  readonly writes: CueWrites
  readonly viewAfter: CaughtUpReads["viewAfter"]
}

export const makeWarmUp = ({ settings, store, commands, writes, viewAfter }: WarmUpDependencies) => {
  /** Promotes the agent's most recently demoted records not in working, as a warm-up asks. */
  const promoteRecent = Effect.fnUntraced(function* (
    agentId: string,
    request: { readonly count?: number; readonly requestId?: string; readonly afterSeq?: number },
  ) {
    const view = yield* viewAfter(agentId, request.afterSeq)
    const count = request.count ?? settings.warmUpCount
    const records = (yield* store.list({ agentId }).pipe(Effect.orDie))
      .filter((r) => !HashMap.has(view.entries, r.entryId))
      .sort((a, b) => b.demotedAt - a.demotedAt || b.timestamp - a.timestamp)
      .slice(0, count)
    const key = `warmup-${request.requestId ?? (yield* Clock.currentTimeMillis).toString(36)}`
    let seq = 0
    for (const r of records) {
      const recalled: Recalled =
        r.keyPoints !== null && r.keyPointsTokens !== null
          ? { ...recalledMeta(r), form: "keyPoints", text: r.keyPoints, tokens: r.keyPointsTokens }
          : { ...recalledMeta(r), form: r.summaryForm, text: r.summary, tokens: r.summaryTokens }
      seq = (yield* writes.promote(view, null, r.entryId, "warm-up", recalled, key)).seq
    }
    return { entryIds: records.map((r) => r.entryId), seq: seq || view.lastSeq }
  })

  // A warm-up promotes records chosen when it runs: with a request id, it runs once, and a retry is answered as it was.
  const warmUp = Effect.fn("Retrieval.warmUp")((agentId: string, request: RequestOf<"warmUp">) =>
    request.requestId === undefined
      ? promoteRecent(agentId, request)
      : commands.once(
          { agentId, operation: "warmUp", requestId: request.requestId, request },
          Effect.map(promoteRecent(agentId, request), (reply) => ({
            reply,
            recorded: reply.entryIds.length > 0,
            seq: reply.seq,
          })),
        ),
  )

  return { warmUp }
}
