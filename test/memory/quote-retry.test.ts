/**
 * A reference by quote whose quotes retrieval cannot look for at the moment is refused with an error the SDK
 * asks again — unless the same request was already stored: then it is answered as it was. Against a real
 * nats-server; retrieval runs as a replica of its own, stopped between the request and its retry.
 */
import { Layer } from "effect"
import { afterAll, beforeAll, expect, it } from "vitest"
import { NoResponse } from "../../sdk/client.ts"
import { memoryService, substrateService } from "../../services/system.ts"
import { eventually } from "../support/eventually.ts"
import { type RunningServices, settingsFor, startTestSystem, type TestSystem } from "../support/system.ts"

const AGENT = "quoting-while-retrieval-stops"

let system: TestSystem
let retrieval: RunningServices
beforeAll(async () => {
  system = await startTestSystem({}, { memory: false })
  const url = system.server.url
  retrieval = await system.startReplica(
    Layer.mergeAll(substrateService(settingsFor(url)("wm-substrate")), memoryService(settingsFor(url)("wm-memory"))),
  )
})
afterAll(async () => system?.stop())

it("answers a retry of a stored reference as it was, and refuses a new one, while retrieval does not answer", {
  timeout: 90_000,
}, async () => {
  const agent = system.client.agent(AGENT)
  await agent.register({ role: "main" })
  const { entryId } = await agent.record({ origin: "USER", content: "The ferry leaves the north pier at noon." })
  const { stepId } = await agent.beginStep({})
  const request = {
    requestId: "reference-with-a-quote",
    stepId,
    entryIds: [entryId],
    quotes: ["a passage no entry of this agent holds"],
  }
  // Retrieval looks for the quote in long-term and finds nothing: the reference stands on its entry id.
  const stored = await eventually(
    "retrieval to answer the quote's look-up",
    () => system.client.call(AGENT, "referenceEntries", request).catch(() => undefined),
    30_000,
    250,
  )
  expect(stored.entryIds).toEqual([entryId])

  await retrieval.stop()
  expect(await system.client.call(AGENT, "referenceEntries", request)).toEqual(stored)

  // Each attempt waits for the gateway's typed answer (its look-up waits 2 s for retrieval), however busy the machine.
  const fresh = await system.client
    .call(AGENT, "referenceEntries", { ...request, requestId: "a-new-reference" }, { timeoutMs: 15_000 })
    .catch((error: unknown) => error)
  expect(fresh).toBeInstanceOf(NoResponse)
  expect(String((fresh as NoResponse).cause)).toMatch(/could not be looked for in long-term/)
})
