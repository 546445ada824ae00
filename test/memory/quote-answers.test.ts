/**
 * A quote the gateway's view does not hold is looked for in long-term: retrieval's query, then the
 * substrate's raw text. Only their answers say the quote names nothing there; when they cannot look (no
 * service answers, a view not caught up), the reference is refused with an error the SDKs ask again, and
 * no quote is dropped or refused as naming nothing. The server is real; retrieval and the substrate are
 * scripted answerers on the operations' subjects.
 */
import { connect, type Msg, type NatsConnection, type Subscription } from "@nats-io/transport-node"
import { Effect, Layer, ManagedRuntime } from "effect"
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import { type ApiError, NotCaughtUp, Unavailable, UnknownEntries } from "../../contracts/errors.ts"
import { ROUTE_ROOT } from "../../contracts/routing.ts"
import { apiSubject } from "../../contracts/subjects.ts"
import { type NatsServerProcess, startNatsServer } from "../../infra/nats-server.ts"
import { makeQuoteResolver } from "../../services/gateway/quotes.ts"
import { encodeError } from "../../services/platform/api/serve.ts"
import { Nats } from "../../services/platform/nats/connection.ts"
import { registered, viewOf } from "../support/events.ts"
import { settingsFor } from "../support/system.ts"

let server: NatsServerProcess
let runtime: ManagedRuntime.ManagedRuntime<Nats, unknown>
/** The scripted services' own connection: the gateway's does not receive what it sends itself. */
let services: NatsConnection
const answerers: Subscription[] = []

beforeAll(async () => {
  server = await startNatsServer()
  runtime = ManagedRuntime.make(Nats.layer.pipe(Layer.provideMerge(settingsFor(server.url)("wm-test"))))
  services = await connect({ servers: server.url })
})
afterEach(async () => {
  for (const answerer of answerers.splice(0)) answerer.unsubscribe()
  // The server has dropped them before the next test asks: none of them answers it.
  await services.flush()
})
afterAll(async () => {
  await services?.close()
  await runtime?.dispose()
  await server?.stop()
})

const AGENT = "quoting-in-long-term"
const QUOTE = "winds the clockwork lamp"
const view = viewOf({ ...registered({ id: AGENT }), agentId: AGENT })

/** Answers one operation of the agent on its subject, as the service serving it replies. */
const answer = async (operation: string, reply: () => { ok: true; value: unknown } | ApiError) => {
  const respond = (_error: unknown, message: Msg) => {
    const answered = reply()
    message.respond(
      JSON.stringify("ok" in answered ? answered : { ok: false, error: encodeError(answered as ApiError) }),
    )
  }
  // A partitioned service's requests reach it on their partition's route (contracts/routing.ts).
  for (const subject of [apiSubject(AGENT, operation), `${ROUTE_ROOT}.*.*.${AGENT}.${operation}`])
    answerers.push(services.subscribe(subject, { callback: respond }))
  await services.flush()
}

const longTermHit = (entryId: string) => ({
  ok: true as const,
  value: {
    results: [
      {
        entryId,
        tier: "long-term",
        origin: "USER",
        timestamp: 1,
        tags: [],
        correlationId: null,
        form: "summary",
        text: "the keeper and the lamp",
        relevance: 0.8,
      },
    ],
  },
})

const rawText = (entryId: string, content: string) => ({
  ok: true as const,
  value: {
    agentId: AGENT,
    entryId,
    timestamp: 1,
    origin: "USER",
    content,
    tags: [],
    correlationId: null,
    moodSnapshot: null,
    emotionalWeight: 0,
    tokens: 12,
    seq: 7,
  },
})

const resolve = (quote: string) =>
  runtime.runPromise(Effect.flatMap(makeQuoteResolver, (resolveQuotes) => resolveQuotes(view, [quote])))
const refusal = (quote: string) =>
  runtime.runPromise(Effect.flip(Effect.flatMap(makeQuoteResolver, (resolveQuotes) => resolveQuotes(view, [quote]))))

describe("a quote looked for in long-term", () => {
  it("names the long-term entry whose raw text holds it", async () => {
    await answer("memory.query", () => longTermHit("e-lamp"))
    await answer("substrate.get", () => rawText("e-lamp", "The keeper WINDS the  clockwork lamp at dusk."))
    expect(await resolve(QUOTE)).toEqual(["e-lamp"])
  })

  it("names nothing when the hit's raw text does not hold it, or the substrate does not know the entry", async () => {
    await answer("memory.query", () => longTermHit("e-other"))
    await answer("substrate.get", () => new UnknownEntries({ entryIds: ["e-other"] }))
    expect(await resolve(QUOTE)).toEqual([])
  })

  it("is refused Unavailable, not taken to name nothing, when no service answers", async () => {
    const refused = await refusal(QUOTE)
    expect(refused).toBeInstanceOf(Unavailable)
    expect(refused).toMatchObject({ reason: expect.stringContaining("retry with the same requestId") })
  })

  it("passes on retrieval's NotCaughtUp, which the SDKs ask again", async () => {
    await answer("memory.query", () => new NotCaughtUp({ afterSeq: 40, appliedSeq: 12 }))
    expect(await refusal(QUOTE)).toBeInstanceOf(NotCaughtUp)
  })

  it("is refused Unavailable when the substrate does not answer for a hit", async () => {
    await answer("memory.query", () => longTermHit("e-lamp"))
    expect(await refusal(QUOTE)).toBeInstanceOf(Unavailable)
  })
})
