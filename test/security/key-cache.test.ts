/**
 * A process keeps the content keys it unwrapped, up to WM_KEY_CACHE_SIZE: a key read again while it is
 * kept is not asked of the key store (a round trip, a parse and an unwrap each), and past the size the
 * least recently used are asked again. Counted on the key bucket's reads against a real nats-server.
 */
import type { KV } from "@nats-io/kv"
import type { NatsConnection } from "@nats-io/transport-node"
import { afterAll, beforeAll, expect, it } from "vitest"
import { type NatsServerProcess, startNatsServer } from "../../infra/nats-server.ts"
import { processKeyStore, WRITER } from "../support/key-stores.ts"

let server: NatsServerProcess
const connections: NatsConnection[] = []

beforeAll(async () => {
  server = await startNatsServer()
})

afterAll(async () => {
  for (const nc of connections) await nc.close()
  await server?.stop()
})

/** A process's key store keeping `cachedKeys` keys, with the reads of its bucket counted. */
const storeKeeping = async (process: string, cachedKeys?: number) => {
  const reads = { count: 0 }
  const counted = (bucket: KV) =>
    new Proxy(bucket, {
      get(target, property, receiver) {
        if (property !== "get") return Reflect.get(target, property, receiver)
        return (...args: Parameters<KV["get"]>) => {
          reads.count++
          return target.get(...args)
        }
      },
    })
  const { nc, store } = await processKeyStore(server.url, process, {
    bucket: counted,
    ...(cachedKeys !== undefined ? { cachedKeys } : {}),
  })
  connections.push(nc)
  return { store, reads }
}

const entries = (agentId: string, n: number) => Array.from({ length: n }, (_, i) => ({ agentId, entryId: `e${i}` }))

it("keeps a fleet's keys up to its size: read again, none is asked of the key store; past the size, the oldest are", async () => {
  // The keys are made by another process, then read here: each is unwrapped from the bucket once.
  const writer = await storeKeeping(WRITER)
  const refs = entries("fleet", 300)
  for (const ref of refs) expect(await writer.store.forWrite(ref, true)).not.toBeNull()

  const keeping = await storeKeeping("keeping", 600)
  const first = await Promise.all(refs.map((ref) => keeping.store.forRead(ref)))
  expect(first.every((key) => key !== null)).toBe(true)
  const afterFirstPass = keeping.reads.count
  for (let pass = 0; pass < 3; pass++)
    for (const [i, ref] of refs.entries()) expect((await keeping.store.forRead(ref))?.equals(first[i]!)).toBe(true)
  expect(keeping.reads.count).toBe(afterFirstPass)

  // Kept at most 100 (at least 50): reading 300 in turn, every one has dropped out before it is read again.
  const small = await storeKeeping("small", 100)
  for (const ref of refs) await small.store.forRead(ref)
  const before = small.reads.count
  for (const [i, ref] of refs.entries()) expect((await small.store.forRead(ref))?.equals(first[i]!)).toBe(true)
  expect(small.reads.count - before).toBe(refs.length)
})
