/**
 * A record no service can read (not an event at all) at the end of the log:
 * every service dead-letters it, moves past it, starts again on that log,
 * and answers reads that ask for a position after it.
 */
import { jetstream } from "@nats-io/jetstream"
import { connect } from "@nats-io/transport-node"
import { afterAll, beforeAll, expect, it } from "vitest"
import { entrySubject } from "../../contracts/subjects.ts"
import { startTestSystem, type TestSystem } from "../support/system.ts"

let system: TestSystem
beforeAll(async () => {
  system = await startTestSystem()
})
afterAll(async () => {
  await system?.stop()
})

it("every service restarts on a log that ends in an undecodable record, and reads after it answer", async () => {
  const agent = system.client.agent("poisoned")
  await agent.register({ role: "main" })
  const before = await agent.record({ origin: "USER", content: "The harbour opens at dawn." })
  const nc = await connect({ servers: system.server.url })
  const poison = await jetstream(nc).publish(entrySubject("poisoned", "bad-1"), "not an event")
  await nc.close()

  // Live: a query that must see the log up to the record it cannot read.
  const live = await system.client.call("poisoned", "query", { query: "harbour", afterSeq: poison.seq })
  expect(live.results.map((r) => r.entryId)).toContain(before.entryId)

  await system.restartServices()
  const view = await agent.view()
  expect(view.entries.map((e) => e.id)).toEqual([before.entryId])
  const again = await system.client.call("poisoned", "query", { query: "harbour", afterSeq: poison.seq })
  expect(again.results.map((r) => r.entryId)).toContain(before.entryId)
}, 120_000)
