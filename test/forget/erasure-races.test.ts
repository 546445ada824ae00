/**
 * Two erasures of the same forget run at once: the operator's `wm forget` and the eraser beside the
 * substrate both finish every tombstone, and each erases what the other is still reading. Every read
 * of stored messages an erasure makes must end when the messages it counted are erased under it.
 */
import { jetstreamManager, StorageType } from "@nats-io/jetstream"
import { connect } from "@nats-io/transport-node"
import { afterAll, beforeAll, expect, it } from "vitest"
import { forget } from "../../cli/audit/forget.ts"
import { agentEvents } from "../../contracts/subjects.ts"
import { eraseMessages, storedRecords } from "../../services/platform/log/stored-messages.ts"
import { readLog } from "../support/log.ts"
import { startTestSystem, type TestSystem } from "../support/system.ts"
import { within } from "../support/within.ts"

let system: TestSystem
beforeAll(async () => {
  system = await startTestSystem()
})
afterAll(async () => system?.stop())

it("a read of stored messages ends while another erasure erases them, newest first", async () => {
  const nc = system.client.nc
  const jsm = await jetstreamManager(nc)
  await jsm.streams.add({ name: "RACE", subjects: ["race.>"], storage: StorageType.Memory })
  const js = jsm.jetstream()
  for (let round = 0; round < 5; round++) {
    const subject = `race.${round}`
    const published: number[] = []
    for (let i = 0; i < 2_000; i += 100)
      published.push(
        ...(await Promise.all(Array.from({ length: 100 }, () => js.publish(subject, "m")))).map((a) => a.seq),
      )
    published.sort((a, b) => a - b)
    // Erased from the newest back, so the read's last counted message is often gone before it is delivered.
    const erasing = (async () => {
      for (let i = published.length; i > 0; i -= 64)
        await eraseMessages(jsm, "RACE", published.slice(Math.max(0, i - 64), i).reverse())
    })()
    const read = await within(`reading ${subject}`, 15_000, storedRecords(nc, "RACE", subject))
    await erasing
    const seqs = read.map((r) => r.seq)
    expect(seqs).toEqual([...seqs].sort((a, b) => a - b))
    expect(seqs.every((seq) => published.includes(seq))).toBe(true)
    expect(await storedRecords(nc, "RACE", subject)).toEqual([])
  }
})

it("an agent forgotten by two operators at once, beside the eraser, is forgotten completely by each", async () => {
  const operators = await Promise.all([
    connect({ servers: system.server.url }),
    connect({ servers: system.server.url }),
  ])
  try {
    for (let round = 0; round < 3; round++) {
      const agentId = `crowded-${round}`
      const agent = system.client.agent(agentId)
      await agent.register({ role: "main" })
      for (let batch = 0; batch < 6; batch++)
        await agent.recordMany(
          Array.from({ length: 50 }, (_, i) => ({
            origin: "USER" as const,
            content: `Remark ${batch}-${i} to forget.`,
          })),
        )
      const reports = await within(
        `two forgets of ${agentId}`,
        30_000,
        Promise.all(operators.map((operator) => forget(operator, agentId))),
      )
      for (const report of reports) expect(report.complete).toBe(true)
      // Each stored a tombstone or finished the other's; the newest erases the older: it is all that is left.
      const left = await readLog(system.server.url, agentEvents(agentId))
      expect(left.map((s) => [s.seq, s.event._tag])).toEqual([
        [Math.max(...reports.map((r) => r.tombstoneSeq)), "AgentForgotten"],
      ])
    }
  } finally {
    await Promise.all(operators.map((operator) => operator.close()))
  }
}, 120_000)
