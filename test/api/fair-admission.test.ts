/**
 * One agent's burst does not queue another agent's request behind it (services/platform/api/admission.ts):
 * with one place besides the requests of idle agents, an agent sends 40 records at once and another agent
 * one record right after; the other agent's record runs at once, so it lands in the log before almost all of
 * the burst, and every record of both is stored once. Every service runs, against a real
 * nats-server.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type NatsServerProcess, startNatsServer } from "../../infra/nats-server.ts"
import { WorkingMemoryClient } from "../../sdk/client.ts"
import { type RunningServices, startSystemWithEnv } from "../support/system.ts"

let server: NatsServerProcess
let services: RunningServices
let client: WorkingMemoryClient

beforeAll(async () => {
  server = await startNatsServer()
  services = await startSystemWithEnv(server.url, { ...process.env, WM_GATEWAY_CONCURRENT_REQUESTS: "1" })
  client = await WorkingMemoryClient.connect({ servers: server.url, timeoutMs: 30_000 })
}, 120_000)

afterAll(async () => {
  await client?.close()
  await services?.stop()
  await server?.stop()
})

describe("admission by agent", () => {
  it("an agent's record sent after another agent's burst is stored before almost all of the burst", async () => {
    const burst = client.agent("admission-burst")
    const bystander = client.agent("admission-bystander")
    await burst.register({ role: "main" })
    await bystander.register({ role: "main" })

    // One connection: the gateway receives the burst's 40 requests, then the bystander's.
    const burstRecords = Array.from({ length: 40 }, (_, i) =>
      burst.record({
        origin: "SYSTEM",
        content: `Burst output ${i}: rows ${i * 100} to ${i * 100 + 99} of the export.`,
      }),
    )
    const bystanderRecord = bystander.record({ origin: "USER", content: "Is the export finished?" })
    const [stored, own] = await Promise.all([Promise.all(burstRecords), bystanderRecord])

    const after = stored.filter((r) => r.seq > own.seq).length
    expect(after).toBeGreaterThanOrEqual(35)
    expect(new Set(stored.map((r) => r.entryId)).size).toBe(40)
    const { events } = await client.call("admission-burst", "readEvents", {})
    expect(events.filter((e) => (e.event as { _tag?: string })._tag === "EntryRecorded")).toHaveLength(40)
  })
})
