/**
 * The services' views keep no ids of long-term entries: a decision about an
 * entry that left working reads where it stands from the entry's own subject.
 * Against a real nats-server, after the services restart (views rebuilt from
 * snapshots and the log, with no long-term structure at all), a long-term
 * entry can still be referenced, comes back as a cue and then as a native
 * entry, and can be forgotten; a reference to the forgotten entry, or to an
 * entry never recorded, is refused as UnknownEntries. A record on the
 * entry's subject that does not decode (dead-lettered) changes nothing of
 * that: where the entry stands follows from the last event that decodes.
 */
import { execFile } from "node:child_process"
import { promisify } from "node:util"
import { jetstream } from "@nats-io/jetstream"
import { connect, type NatsConnection } from "@nats-io/transport-node"
import { afterAll, beforeAll, expect, it } from "vitest"
import type { EventOf } from "../../contracts/events.ts"
import { entrySubject } from "../../contracts/subjects.ts"
import type { AgentClient } from "../../sdk/client.ts"
import { steppingClock } from "../support/clock.ts"
import { eventually } from "../support/eventually.ts"
import { FILLER_TURNS } from "../support/fillers.ts"
import { readLog } from "../support/log.ts"
import { startTestSystem, type TestSystem } from "../support/system.ts"

const run = promisify(execFile)
const T0 = Date.UTC(2024, 8, 2, 9)
const KEY = "The spare key to the shed hangs behind the calendar."
const CODE = "The alarm code for the studio is 4471."

let system: TestSystem
let nc: NatsConnection
beforeAll(async () => {
  system = await startTestSystem()
  nc = await connect({ servers: system.server.url })
})
afterAll(async () => {
  await nc?.close()
  await system?.stop()
})

/** A record on a subject that no projection decodes (a timestamp that is not a number): it is dead-lettered. */
const undecodable = async (subject: string) =>
  (
    await jetstream(nc).publish(
      subject,
      JSON.stringify({ _tag: "CueDropped", v: 1, eventId: "broken", agentId: "lookup", at: "noon", entryId: "x" }),
    )
  ).seq

const wm = (...args: string[]) =>
  run("node_modules/.bin/node", ["cli/wm.ts", ...args, "--server", system.server.url], { cwd: process.cwd() })

const eventsOn = async (entryId: string) =>
  (await readLog(system.server.url)).filter((s) => "entryId" in s.event && s.event.entryId === entryId)

const inWorking = async (agent: AgentClient, entryId: string) =>
  (await agent.view()).entries.find((e) => e.id === entryId && !e.transient)

it("a long-term entry is referenced, rehydrated and forgotten by what its subject says, after a restart", {
  timeout: 150_000,
}, async () => {
  const agent = system.client.agent("lookup")
  await agent.register({ role: "custom", budget: 200 })
  const clock = steppingClock(T0, 60_000)
  const key = (await agent.record({ origin: "USER", content: KEY, timestamp: clock.next() })).entryId
  const code = (await agent.record({ origin: "USER", content: CODE, timestamp: clock.next() })).entryId
  for (let i = 0; i < 30; i++)
    await agent.record({ origin: "USER", content: FILLER_TURNS[i % FILLER_TURNS.length]!, timestamp: clock.next() })
  await eventually(
    "both entries to demote",
    async () =>
      (await eventsOn(key)).some((s) => s.event._tag === "EntryDemoted") &&
      (await eventsOn(code)).some((s) => s.event._tag === "EntryDemoted"),
    20_000,
  )

  // Every view is rebuilt: none of them has ever seen these entries as anything but gone from working.
  await system.restartServices()
  // Then the last record on the key's subject is one no projection decodes.
  const brokenSeq = await undecodable(entrySubject("lookup", key))
  agent.lastSeq = brokenSeq
  expect(await inWorking(agent, key)).toBeUndefined()

  // Referenced by id: accepted, rehydrated as a cue, promoted back to a native entry.
  const { stepId } = await agent.beginStep()
  expect((await agent.reference(stepId, [key])).entryIds).toEqual([key])
  await expect.poll(async () => (await inWorking(agent, key))?.content, { timeout: 10_000 }).toBe(KEY)
  const cue = (await eventsOn(key)).find((s) => s.event._tag === "CueRehydrated")?.event as
    | EventOf<"CueRehydrated">
    | undefined
  expect(cue).toMatchObject({ trigger: "explicit-reference", stepId })
  const history = await eventsOn(key)
  expect(history.map((s) => s.event._tag).slice(-2)).toEqual(["CueRehydrated", "CuePromoted"])
  // The cue was written after the record that does not decode: it expected that record's position.
  expect(history.find((s) => s.event._tag === "CueRehydrated")!.seq).toBeGreaterThan(brokenSeq)

  // Forgotten while in long-term: accepted, and afterwards the entry is unknown to a reference.
  const { stdout } = await wm("forget", "--agent", "lookup", "--entry", code, "--json")
  const forgotten = JSON.parse(stdout) as { recorded: boolean; tombstoneSeq: number }
  expect(forgotten.recorded).toBe(true)
  agent.lastSeq = forgotten.tombstoneSeq
  expect((await eventsOn(code)).map((s) => s.event._tag)).toEqual(["EntryForgotten"])
  await expect(agent.reference(stepId, [code])).rejects.toMatchObject({ _tag: "UnknownEntries", entryIds: [code] })
  await expect(agent.reference(stepId, ["never-recorded"])).rejects.toMatchObject({
    _tag: "UnknownEntries",
    entryIds: ["never-recorded"],
  })
  await agent.endStep(stepId)
})
