/**
 * How fast a write is refused once storage is exhausted: the event stream at
 * its WM_STREAM_MAX_BYTES, and the server's JetStream store at max_file_store.
 * Records until refused, then five more refusals, and prints their latencies.
 *
 *   node bench/storage-full.ts
 */
import { startNatsServer } from "../infra/nats-server.ts"
import { WorkingMemoryClient } from "../sdk/client.ts"
import { systemLayer } from "../services/system.ts"
import { settingsFor, startServices } from "../test/support/system.ts"

const run = async (label: string, serverConfig: string | undefined, overrides: object) => {
  const server = await startNatsServer(serverConfig ? { config: serverConfig } : {})
  const services = await startServices(systemLayer(settingsFor(server.url, overrides), { fade: false, memory: false }))
  const client = await WorkingMemoryClient.connect({ servers: server.url })
  const agent = client.agent("filler")
  await agent.register({ role: "main" })
  const times: number[] = []
  let tag = ""
  for (let i = 0; i < 400; i++) {
    const t = performance.now()
    const ok = await agent
      .record({ origin: "SYSTEM", content: `Row ${i}: ${"checksum verified, upload complete. ".repeat(25)}` })
      .then(
        () => true,
        (e) => {
          tag = e?._tag ?? e?.name
          return false
        },
      )
    if (!ok) {
      times.push(performance.now() - t)
      if (times.length >= 5) break
    }
  }
  console.log(label, tag, "refusals in ms:", times.map((t) => t.toFixed(1)).join(", "))
  await client.close()
  await services.stop()
  await server.stop()
}
await run("stream max_bytes", undefined, { streamMaxBytes: 60_000 })
await run("server max_file_store", "jetstream { max_file_store: 120000 }", {})
