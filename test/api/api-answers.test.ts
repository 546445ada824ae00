/**
 * The API answers with a typed error where a caller would otherwise be left
 * with a timeout or "no responders": a read asking for a log position the
 * services never reach is told NotCaughtUp before the SDK gives up, and an
 * operation the API does not have is refused as such.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { startTestSystem, type TestSystem } from "../support/system.ts"

let system: TestSystem
const unreachable = 1_000_000_000

beforeAll(async () => {
  system = await startTestSystem()
  await system.client.agent("timing-agent").register({ role: "main" })
}, 60_000)
afterAll(() => system?.stop())

const failureOf = (promise: Promise<unknown>) =>
  promise.then(
    () => null,
    (error: unknown) => error,
  )

describe("reads after a position never reached", () => {
  it("getView through the SDK answers NotCaughtUp, not NoResponse", async () => {
    const error = await failureOf(system.client.call("timing-agent", "getView", { afterSeq: unreachable }))
    expect(error).toMatchObject({ _tag: "NotCaughtUp", afterSeq: unreachable })
  }, 30_000)

  it("query through the SDK answers NotCaughtUp", async () => {
    const error = await failureOf(
      system.client.call("timing-agent", "query", { query: "anything", afterSeq: unreachable }),
    )
    expect(error).toMatchObject({ _tag: "NotCaughtUp", afterSeq: unreachable })
  }, 30_000)

  it("thread through the SDK answers NotCaughtUp", async () => {
    const error = await failureOf(
      system.client.call("timing-agent", "thread", { correlationId: "c-1", afterSeq: unreachable }),
    )
    expect(error).toMatchObject({ _tag: "NotCaughtUp", afterSeq: unreachable })
  }, 30_000)

  it("getRaw of an unknown entry after an unreachable position answers NotCaughtUp, not UnknownEntries", async () => {
    const error = await failureOf(
      system.client.call("timing-agent", "getRaw", { entryId: "e-not-yet", afterSeq: unreachable }),
    )
    expect(error).toMatchObject({ _tag: "NotCaughtUp", afterSeq: unreachable })
  }, 30_000)
})

const textDecoder = new TextDecoder()
const rawRequest = async (subject: string, body: unknown) => {
  const reply = await system.client.nc.request(subject, JSON.stringify(body), { timeout: 5_000 })
  return JSON.parse(textDecoder.decode(reply.data)) as { ok: boolean; value?: unknown; error?: Record<string, unknown> }
}

describe("operations the API does not have", () => {
  it("are refused with a ValidationError on operation, not left without responders", async () => {
    const reply = await rawRequest("wm.api.timing-agent.no.such.op", {})
    expect(reply).toMatchObject({ ok: false, error: { _tag: "ValidationError", field: "operation" } })
    expect(String(reply.error?.reason)).toContain("no.such.op")
  })

  it("leave known operations to the services that serve them", async () => {
    const replies = await Promise.all(Array.from({ length: 20 }, () => rawRequest("wm.api.timing-agent.view.get", {})))
    expect(replies.map((r) => r.ok)).toEqual(Array.from({ length: 20 }, () => true))
  })
})
