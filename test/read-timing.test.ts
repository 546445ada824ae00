/**
 * A read asking for a log position the services never reach is told so, as
 * NotCaughtUp, before the SDK gives up waiting for an answer.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { startTestSystem, type TestSystem } from "./support/system.ts"

let system: TestSystem
const unreachable = 1_000_000_000

beforeAll(async () => {
  system = await startTestSystem()
  await system.client.agent("timing-agent").register({ role: "main" })
}, 60_000)
afterAll(() => system?.stop())

const failureOf = (promise: Promise<unknown>) => promise.then(() => null, (error: unknown) => error)

describe("reads after a position never reached", () => {
  it("getView through the SDK answers NotCaughtUp, not NoResponse", async () => {
    const error = await failureOf(system.client.call("timing-agent", "getView", { afterSeq: unreachable }))
    expect(error).toMatchObject({ _tag: "NotCaughtUp", afterSeq: unreachable })
  }, 30_000)

  it("query through the SDK answers NotCaughtUp", async () => {
    const error = await failureOf(system.client.call("timing-agent", "query", { query: "anything", afterSeq: unreachable }))
    expect(error).toMatchObject({ _tag: "NotCaughtUp", afterSeq: unreachable })
  }, 30_000)

  it("getRaw of an unknown entry after an unreachable position answers NotCaughtUp, not UnknownEntries", async () => {
    const error = await failureOf(system.client.call("timing-agent", "getRaw", { entryId: "e-not-yet", afterSeq: unreachable }))
    expect(error).toMatchObject({ _tag: "NotCaughtUp", afterSeq: unreachable })
  }, 30_000)
})
