import { jetstream, jetstreamManager } from "@nats-io/jetstream"
import { afterAll, beforeAll, expect, it } from "vitest"
import { agentStepSubject, DEAD_LETTER_STREAM, entrySubject } from "../../contracts/subjects.ts"
import { publishRaw } from "../support/log.ts"
import { startTestSystem, type TestSystem } from "../support/system.ts"

let system: TestSystem
beforeAll(async () => {
  system = await startTestSystem()
})
afterAll(async () => system?.stop())

const deadLetters = async (subject: string) => {
  const nc = system.client.nc
  const jsm = await jetstreamManager(nc)
  const info = await jsm.streams.info(DEAD_LETTER_STREAM, { subjects_filter: ">" })
  const out: Array<{ seq: number; reason: string; projection: string }> = []
  const consumer = await jetstream(nc).consumers.get(DEAD_LETTER_STREAM, { filter_subjects: subject })
  const count = info.state.subjects?.[subject] ?? 0
  if (count === 0) return out
  const messages = await consumer.consume()
  for await (const m of messages) {
    out.push(m.json())
    if (m.info.pending === 0) break
  }
  await messages.close()
  return out
}

it("poison events are dead-lettered with their reason and the projection keeps going", async () => {
  const agent = system.client.agent("poisoned")
  await agent.register({ role: "main" })
  await agent.record({ origin: "USER", content: "before the poison" })
  const garbage = await publishRaw(system.server.url, agentStepSubject("poisoned"), "\u0000not json at all")
  const invalidVersion = await publishRaw(
    system.server.url,
    agentStepSubject("poisoned"),
    JSON.stringify({
      _tag: "StepStarted",
      v: 0,
      eventId: "x",
      agentId: "poisoned",
      at: 1,
      causationId: null,
      correlationId: null,
      stepId: "s",
      focus: null,
    }),
  )
  const wrongType = await publishRaw(
    system.server.url,
    entrySubject("poisoned", "bad"),
    JSON.stringify({
      _tag: "EntryRecorded",
      v: 1,
      eventId: "y",
      agentId: "poisoned",
      at: 1,
      causationId: null,
      correlationId: null,
      entryId: "bad",
      timestamp: "yesterday",
      origin: "USER",
      content: "c",
      tags: [],
      moodSnapshot: null,
      emotionalWeight: 0,
      tokens: 3,
    }),
  )
  const unknownType = await publishRaw(
    system.server.url,
    agentStepSubject("poisoned"),
    JSON.stringify({ _tag: "Teleported", v: 1 }),
  )
  await agent.record({ origin: "USER", content: "after the poison" })

  const view = await agent.view()
  expect(view.entries.map((e) => e.content)).toEqual(["before the poison", "after the poison"])

  await expect.poll(async () => (await deadLetters("wm.dlq.working")).length, { timeout: 5_000 }).toBe(4)
  const letters = await deadLetters("wm.dlq.working")
  const bySeq = new Map(letters.map((l) => [l.seq, l.reason]))
  expect(bySeq.get(garbage)).toMatch(/not JSON/)
  expect(bySeq.get(invalidVersion)).toMatch(/^v: unsupported schema version 0 of StepStarted/)
  expect(bySeq.get(wrongType)).toMatch(/^timestamp: /)
  expect(bySeq.get(unknownType)).toMatch(/^_tag: unknown event type "Teleported"/)
  // The gateway's projection met the same records and kept going too.
  expect((await deadLetters("wm.dlq.gateway")).length).toBe(4)
})
