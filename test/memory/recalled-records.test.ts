/**
 * The records recalls read are kept: an entry recalled again is not read from the log again, until it is
 * forgotten, its agent is let go, or more text than is kept was read since; a read a forget overtook is not
 * kept. Read through the substrate reader the memory service uses, against a real log.
 */
import { Deferred, Effect, Fiber, Layer, ManagedRuntime } from "effect"
import { afterAll, beforeAll, expect, it } from "vitest"
import { RecalledRecords } from "../../services/memory/retrieval/recalled-records.ts"
import { foundation } from "../../services/platform/foundation.ts"
import { SubstrateReader, type SubstrateReaderShape } from "../../services/platform/substrate-reader.ts"
import { settingsFor, startTestSystem, type TestSystem } from "../support/system.ts"

let system: TestSystem
let runtime: ManagedRuntime.ManagedRuntime<SubstrateReader, unknown>
const entries: string[] = []
const AGENT = "recaller"

beforeAll(async () => {
  system = await startTestSystem()
  const agent = system.client.agent(AGENT)
  await agent.register({ role: "main" })
  for (const content of ["The tide turns at four.", "The ferry leaves at nine.", "The harbour closes at dusk."])
    entries.push((await agent.record({ origin: "USER", content })).entryId)
  runtime = ManagedRuntime.make(
    SubstrateReader.layer.pipe(Layer.provide(foundation(settingsFor(system.server.url)("wm-test")))),
  )
}, 60_000)
afterAll(async () => {
  await runtime?.dispose()
  await system?.stop()
})

/** The log's reader, counting what it is asked, and the kept records read through it. */
const counted = async (maxChars?: number) => {
  const log = await runtime.runPromise(SubstrateReader)
  const asked: string[] = []
  const substrate: SubstrateReaderShape = {
    get: (agentId, entryId) =>
      Effect.suspend(() => {
        asked.push(entryId)
        return log.get(agentId, entryId)
      }),
  }
  const recalled = new RecalledRecords(maxChars)
  const reader = recalled.reader(substrate)
  const read = (entryId: string) => runtime.runPromise(reader.get(AGENT, entryId))
  return { asked, recalled, reader, read }
}

it("an entry read again is answered from what was read, until it is forgotten", async () => {
  const { asked, recalled, read } = await counted()
  expect((await read(entries[0]!))?.content).toBe("The tide turns at four.")
  expect((await read(entries[0]!))?.content).toBe("The tide turns at four.")
  expect(asked).toEqual([entries[0]])

  recalled.forgetEntry(AGENT, entries[0]!)
  await read(entries[0]!)
  expect(asked).toEqual([entries[0], entries[0]])
})

it("an agent let go has nothing kept", async () => {
  const { asked, recalled, read } = await counted()
  await read(entries[0]!)
  await read(entries[1]!)
  recalled.dropAgent(AGENT)
  expect(recalled.size).toBe(0)
  await read(entries[1]!)
  expect(asked).toEqual([entries[0], entries[1], entries[1]])
})

it("past the text it keeps, the least recently read go first", async () => {
  // Room for two of the three records.
  const { asked, read } = await counted("The harbour closes at dusk.".length * 2)
  await read(entries[0]!)
  await read(entries[1]!)
  await read(entries[0]!)
  await read(entries[2]!)
  expect(asked).toEqual([entries[0], entries[1], entries[2]])
  await read(entries[0]!)
  await read(entries[1]!)
  expect(asked).toEqual([entries[0], entries[1], entries[2], entries[1]])
})

it("a read that a forget overtook is not kept", async () => {
  const log = await runtime.runPromise(SubstrateReader)
  const asked: string[] = []
  const gate = await runtime.runPromise(Deferred.make<void>())
  const substrate: SubstrateReaderShape = {
    get: (agentId, entryId) =>
      Effect.suspend(() => {
        asked.push(entryId)
        return Effect.andThen(Deferred.await(gate), log.get(agentId, entryId))
      }),
  }
  const recalled = new RecalledRecords()
  const reader = recalled.reader(substrate)
  const reading = runtime.runFork(reader.get(AGENT, entries[2]!))
  recalled.forgetEntry(AGENT, entries[1]!)
  await runtime.runPromise(Deferred.succeed(gate, undefined))
  expect((await runtime.runPromise(Fiber.join(reading)))?.content).toBe("The harbour closes at dusk.")
  expect(recalled.size).toBe(0)
  await runtime.runPromise(reader.get(AGENT, entries[2]!))
  expect(asked).toEqual([entries[2], entries[2]])
})
