/**
 * Forget is durable intent first: once the tombstone is stored, the forget
 * finishes whatever stops in between. Here the services are down when the
 * operator forgets, so the working partition snapshots taken at shutdown
 * still hold the text and nobody erases them: the command records the
 * tombstone, erases the log, says the forget is not complete (waiting for
 * those snapshots) and exits 1.
 * When the services start again, the eraser beside the substrate finishes
 * it — no store file holds the content any more — and running the command
 * again writes nothing new and reports it complete.
 */

import { execFile } from "node:child_process"
import { promisify } from "node:util"
import { jetstream } from "@nats-io/jetstream"
import { afterAll, beforeAll, expect, it } from "vitest"
import { partitionOf } from "../../contracts/partitions.ts"
import { agentEvents, agentStepSubject, entrySubject } from "../../contracts/subjects.ts"
import { type AgentView, evolve } from "../../domain/agent-view.ts"
import { decideForget } from "../../domain/forget.ts"
import { systemLayer } from "../../services/system.ts"
import { eventually } from "../support/eventually.ts"
import { appendEvents, openedSnapshotBody, publishRaw, readLog, sealedContentOf } from "../support/log.ts"
import { filesHolding } from "../support/store-files.ts"
import { settingsFor, startServices, startTestSystem, type TestSystem } from "../support/system.ts"

const run = promisify(execFile)
let system: TestSystem
beforeAll(async () => {
  system = await startTestSystem()
})
afterAll(async () => system?.stop())

const wm = (...args: string[]) =>
  run("node_modules/.bin/node", ["cli/wm.ts", ...args, "--server", system.server.url], { cwd: process.cwd() })

const SECRET = "OCELOT2208MARBLE"

it("a forget the services could not confirm is finished by the eraser when they start again", async () => {
  const agent = system.client.agent("interrupted")
  await agent.register({ role: "main" })
  const { entryId } = await agent.record({ origin: "USER", content: `The alarm code is ${SECRET}.` })
  await eventually(
    "the substrate to store the entry",
    async () =>
      await agent.raw(entryId).then(
        (r) => r.content.includes(SECRET),
        () => false,
      ),
  )
  const store = [system.server.storeDir]
  // The log holds the content sealed: the search finds its sealed bytes, and never the text.
  const sealed = await sealedContentOf(system.server.url, "interrupted", entryId)
  expect(filesHolding(store, sealed).length).toBeGreaterThan(0)

  await system.services.stop()
  const first = await wm("forget", "--agent", "interrupted", "--entry", entryId, "--wait", "1", "--json").then(
    () => null,
    (e: { code: number; stdout: string }) => e,
  )
  expect(first?.code).toBe(1)
  const report = JSON.parse(first!.stdout) as {
    complete: boolean
    pending: string[]
    recorded: boolean
    tombstoneSeq: number
  }
  expect(report).toMatchObject({ complete: false, recorded: true })
  // The partition's snapshots, written when the services stopped, are what it waits for.
  expect(report.pending).toContain(`snapshot working.${partitionOf("interrupted")}`)
  // The intent is on record, and the log is already erased; the snapshots still hold the text (sealed).
  expect((await readLog(system.server.url, entrySubject("interrupted", entryId))).map((s) => s.event._tag)).toEqual([
    "EntryForgotten",
  ])
  const pendingSnapshot = await openedSnapshotBody(system.server.url, "working", partitionOf("interrupted"))
  expect(pendingSnapshot?.body).toContain(SECRET)

  system.services = await startServices(systemLayer(settingsFor(system.server.url)))
  await eventually(
    "the eraser to finish the forget",
    async () =>
      filesHolding(store, sealed).length === 0 &&
      (await openedSnapshotBody(system.server.url, "working", partitionOf("interrupted")))?.id !== pendingSnapshot?.id,
  )
  expect(filesHolding(store, SECRET)).toEqual([])
  agent.lastSeq = report.tombstoneSeq
  await expect(agent.raw(entryId)).rejects.toMatchObject({ _tag: "UnknownEntries" })

  const again = JSON.parse(
    (await wm("forget", "--agent", "interrupted", "--entry", entryId, "--json")).stdout,
  ) as typeof report
  expect(again).toMatchObject({ complete: true, recorded: false, tombstoneSeq: report.tombstoneSeq, pending: [] })
  expect(
    (await readLog(system.server.url, agentEvents("interrupted"))).filter((s) => s.event._tag === "EntryForgotten"),
  ).toHaveLength(1)
})

it("a tombstone stored with nothing erased yet (the command stopped right after it) is finished by the eraser", async () => {
  const SECOND = "LYNX5530GARNET"
  const agent = system.client.agent("stopped-short")
  await agent.register({ role: "main" })
  const { entryId } = await agent.record({ origin: "USER", content: `The locker holds ${SECOND}.` })
  // A record nobody can decode, carrying the text: every projection dead-letters it.
  await publishRaw(
    system.server.url,
    agentStepSubject("stopped-short"),
    `{"_tag":"StepStarted","v":0,"note":"${SECOND}"}`,
  )
  await eventually(
    "the substrate to store the entry",
    async () =>
      await agent.raw(entryId).then(
        () => true,
        () => false,
      ),
  )
  const store = [system.server.storeDir]

  await system.services.stop()
  // What `wm forget` stores first, decided on the agent's view as the log has it.
  let view: AgentView | undefined
  for (const stored of await readLog(system.server.url, agentEvents("stopped-short")))
    view = evolve(view, stored.event, stored)
  const decision = decideForget(
    view,
    {},
    {
      eventId: "stopped-short:forget",
      agentId: "stopped-short",
      at: Date.now(),
      causationId: "operator:forget",
      correlationId: null,
    },
  )
  if (!decision.ok) throw new Error(decision.error.message)
  const tombstone = decision.event
  await appendEvents(system.server.url, [tombstone])
  const sealedSecond = await sealedContentOf(system.server.url, "stopped-short", entryId)
  expect(filesHolding(store, sealedSecond).length).toBeGreaterThan(0)

  system.services = await startServices(systemLayer(settingsFor(system.server.url)))
  // Its sealed record, and the dead letters of the poison record carrying the text in clear, all erased.
  await eventually(
    "the eraser to finish the forget",
    () => filesHolding(store, sealedSecond).length === 0 && filesHolding(store, SECOND).length === 0,
  )
  expect((await readLog(system.server.url, agentEvents("stopped-short"))).map((s) => s.event._tag)).toEqual([
    "AgentForgotten",
  ])
})

it("a dead letter of a forgotten record that arrives after the forget (a projection catching up) is erased as it arrives", async () => {
  const LATE = "TAPIR9047SILVER"
  const KEPT = "HERON1180BRONZE"
  const agent = system.client.agent("late-letters")
  await agent.register({ role: "main" })
  const forgotten = await agent.record({ origin: "USER", content: "A remark to forget." })
  const kept = await agent.record({ origin: "USER", content: "A remark to keep." })
  await wm("forget", "--agent", "late-letters", "--entry", forgotten.entryId)

  const letter = (record: { entryId: string; seq: number }, payload: string) =>
    JSON.stringify({
      projection: "late",
      seq: record.seq,
      subject: entrySubject("late-letters", record.entryId),
      reason: "apply failed: test",
      payload,
    })
  const js = jetstream(system.client.nc)
  await js.publish("wm.dlq.late", letter(kept, `{"content":"${KEPT}"}`))
  await js.publish("wm.dlq.late", letter(forgotten, `{"content":"${LATE}"}`))
  const store = [system.server.storeDir]
  await eventually("the late dead letter to be erased", () => filesHolding(store, LATE).length === 0)
  // A letter whose record is still in the log is kept.
  expect(filesHolding(store, KEPT).length).toBeGreaterThan(0)
})
