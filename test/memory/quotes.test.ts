/**
 * A reference may name entries by quoting them: the entries whose text contains the quote, case and
 * whitespace aside — a working entry from the view, a long-term one through retrieval and its raw text.
 * A quote that names nothing is refused on `quotes`. Against a real nats-server with every service.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ValidationError } from "../../contracts/errors.ts"
import { steppingClock } from "../support/clock.ts"
import { recordThenDemote } from "../support/fillers.ts"
import { lastSeq } from "../support/log.ts"
import { startTestSystem, type TestSystem } from "../support/system.ts"

const MINUTE = 60_000
const T0 = Date.UTC(2024, 6, 1, 8)

let system: TestSystem
beforeAll(async () => {
  system = await startTestSystem()
})
afterAll(async () => system?.stop())

describe("references by quote", () => {
  it("name a working entry, and a long-term entry by its raw text", { timeout: 90_000 }, async () => {
    const agent = system.client.agent("quoting")
    await agent.register({ role: "custom", budget: 200 })
    const clock = steppingClock(T0, MINUTE)
    const demoted = await recordThenDemote(
      agent,
      system.server.url,
      "The lighthouse keeper winds the clockwork lamp every evening at dusk.",
      clock,
    )
    const { entryId: recent } = await agent.record({
      origin: "USER",
      content: "Pack the  Red Umbrella for Thursday's walk.",
      timestamp: clock.next(),
    })
    agent.lastSeq = Math.max(agent.lastSeq, await lastSeq(system.server.url))

    const { stepId } = await agent.beginStep({})
    const working = await agent.reference(stepId, [], ["pack the red umbrella"])
    expect(working.entryIds).toEqual([recent])
    const longTerm = await agent.reference(stepId, [], ["WINDS THE CLOCKWORK LAMP"])
    expect(longTerm.entryIds).toEqual([demoted])
    await agent.endStep(stepId)
  })

  it("are refused on `quotes` when no entry of the agent contains the quoted text", async () => {
    const agent = system.client.agent("quoting-nothing")
    await agent.register({ role: "main" })
    await agent.record({ origin: "USER", content: "Nothing about boats here." })
    const { stepId } = await agent.beginStep({})
    const refused = await agent.reference(stepId, [], ["a sailing regatta"]).catch((error: unknown) => error)
    expect(refused).toBeInstanceOf(ValidationError)
    expect(refused).toMatchObject({ field: "quotes" })
  })
})
