/**
 * A connection whose path dies without a word (a network partition, a dropped NAT entry): no FIN, no
 * RST, bytes simply stop. The SDK's pings notice and it connects again, so a call made after the stall
 * is answered instead of every attempt vanishing into the dead connection.
 */
import { createServer, type Server, Socket } from "node:net"
import { connect } from "@nats-io/transport-node"
import { afterAll, beforeAll, expect, it } from "vitest"
import { apiSubject } from "../../contracts/subjects.ts"
import { type NatsServerProcess, startNatsServer } from "../../infra/nats-server.ts"
import { WorkingMemoryClient } from "../../sdk/client.ts"

/** A TCP relay to the server whose open connections can be stalled; new ones are relayed as usual. */
const stallingRelay = async (port: number) => {
  const open = new Set<{ client: Socket; upstream: Socket; stalled: boolean }>()
  let connections = 0
  const server: Server = createServer((client) => {
    connections++
    const pair = { client, upstream: new Socket(), stalled: false }
    pair.upstream.connect(port, "127.0.0.1")
    client.on("data", (chunk) => {
      if (!pair.stalled) pair.upstream.write(chunk)
    })
    pair.upstream.on("data", (chunk) => {
      if (!pair.stalled) client.write(chunk)
    })
    const close = () => {
      client.destroy()
      pair.upstream.destroy()
      open.delete(pair)
    }
    client.on("close", close).on("error", close)
    pair.upstream.on("close", close).on("error", close)
    open.add(pair)
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const address = server.address()
  if (address === null || typeof address === "string") throw new Error("no relay port")
  return {
    url: `nats://127.0.0.1:${address.port}`,
    connections: () => connections,
    /** Every open connection stops carrying bytes, both ways, and stays open. */
    stall: () => {
      for (const pair of open) pair.stalled = true
    },
    close: async () => {
      for (const pair of open) {
        pair.client.destroy()
        pair.upstream.destroy()
      }
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}

let server: NatsServerProcess
beforeAll(async () => {
  server = await startNatsServer({ routing: false })
})
afterAll(async () => server?.stop())

it("a call after its connection stalled is answered over a new connection", async () => {
  const responderConnection = await connect({ servers: server.url })
  let seen = 0
  responderConnection.subscribe(apiSubject("stalled", "view.get"), {
    callback: (_error, message) => {
      seen++
      message.respond(JSON.stringify({ ok: true, value: { answer: seen } }))
    },
  })
  await responderConnection.flush()
  const relay = await stallingRelay(server.port)
  const client = await WorkingMemoryClient.connect({
    servers: relay.url,
    timeoutMs: 1_000,
    attempts: 8,
    pingIntervalMs: 250,
  })
  try {
    const agent = client.agent("stalled")
    expect(await agent.view()).toEqual({ answer: 1 })
    relay.stall()
    const after = (await agent.view()) as unknown as { answer: number }
    expect(after.answer).toBeGreaterThanOrEqual(2)
    expect(relay.connections()).toBeGreaterThanOrEqual(2)
  } finally {
    await client.close()
    await relay.close()
    await responderConnection.close()
  }
})
