/**
 * Which entries a reference's quotes name: those whose text contains the quote (case and whitespace
 * aside). Working entries and cues first, from the gateway's view; else long-term entries, found through
 * retrieval's query and checked against their raw text in the substrate. Only an answer says a quote names
 * nothing there: a refusal other than "unknown entry", or no answer, fails the reference with an error the
 * SDKs ask again (NotCaughtUp, Overloaded or Unavailable), so a quote is never dropped or refused as naming
 * nothing because retrieval could not look at that moment.
 */
import { Effect, HashMap } from "effect"
import type { OperationName, RequestOf, ResponseOf } from "../../contracts/api.ts"
import { type NotCaughtUp, type Overloaded, Unavailable } from "../../contracts/errors.ts"
import type { AgentView } from "../../domain/agent-view.ts"
import { callOperation } from "../platform/api/call.ts"
import { Nats } from "../platform/nats/connection.ts"

const normalise = (text: string) => text.toLowerCase().replace(/\s+/g, " ").trim()

/**
 * How long each look-up waits for its answer: the query, then the raw texts at once, answer within one SDK
 * attempt (5 s), so the caller hears the typed refusal, not a timeout.
 */
const LOOK_UP_TIMEOUT = "2 seconds"

export const makeQuoteResolver = Effect.gen(function* () {
  const { nc } = yield* Nats
  /** A call whose refusal as unknown means the quote is not found there (null). */
  const ask = <O extends OperationName>(
    agentId: string,
    operation: O,
    request: RequestOf<O>,
  ): Effect.Effect<ResponseOf<O> | null, NotCaughtUp | Overloaded | Unavailable> =>
    callOperation(nc, agentId, operation, request, { timeout: LOOK_UP_TIMEOUT }).pipe(
      Effect.catchTag("UnknownEntries", () => Effect.succeed(null)),
      Effect.mapError((error) =>
        error._tag === "NotCaughtUp" || error._tag === "Overloaded" || error._tag === "Unavailable"
          ? error
          : new Unavailable({
              reason: `the quoted text could not be looked for in long-term now (${operation}: ${error.message}); nothing was stored, retry with the same requestId`,
            }),
      ),
    )

  const resolveOne = (view: AgentView, quote: string) =>
    Effect.gen(function* () {
      const agentId = view.config.id
      const needle = normalise(quote)
      const inWorking = [...HashMap.values(view.entries), ...HashMap.values(view.cues)]
        .filter((e) => [e.content, e.keyPoints, e.summary].some((t) => t !== null && normalise(t).includes(needle)))
        .map((e) => e.id)
      if (inWorking.length > 0) return inWorking
      // Retrieval answers once it has seen what this view has (the demotion that put the entry there).
      const found = yield* ask(agentId, "query", { query: quote, limit: 5, afterSeq: view.lastSeq })
      const candidates = (found?.results ?? []).filter((r) => r.tier === "long-term").map((r) => r.entryId)
      const raws = yield* Effect.forEach(candidates, (entryId) => ask(agentId, "getRaw", { entryId }), {
        concurrency: "unbounded",
      })
      return raws.filter((r) => r !== null && normalise(r.content).includes(needle)).map((r) => r!.entryId)
    })

  /** The ids of the entries the quotes name, on the agent's view as it stands. */
  return (view: AgentView, quotes: ReadonlyArray<string>) =>
    Effect.forEach(quotes, (quote) => resolveOne(view, quote)).pipe(Effect.map((ids) => ids.flat()))
})
