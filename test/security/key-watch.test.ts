/**
 * A service wraps a new entry's key under its agent's key as its watch of the key bucket last read it.
 * When that watch is behind a rotation or a forget of the agent, the entry key must still end up
 * wrapped under a key the agent lists (or the write refused): the watch is held behind here while
 * another process rotates or forgets, and released only once the write waits on it.
 */
import { jetstream, jetstreamManager } from "@nats-io/jetstream"
import { connect, type NatsConnection } from "@nats-io/transport-node"
import { afterAll, beforeAll, expect, it } from "vitest"
import { agentKeyName, KEY_BUCKET } from "../../contracts/buckets.ts"
import type { Tombstone } from "../../domain/forget.ts"
import { type NatsServerProcess, startNatsServer } from "../../infra/nats-server.ts"
import { openKeyBucket } from "../../services/platform/keys/content-keys.ts"
import { destroyContentKeys } from "../../services/platform/keys/destroy-keys.ts"
import { parseKeyEncryptionKeys } from "../../services/platform/keys/kek.ts"
import { ContentKeyStore, KEY_STREAM } from "../../services/platform/keys/key-store.ts"
import { KeyWatch, type WatchedKey } from "../../services/platform/keys/key-watch.ts"
import { rotateKeys } from "../../services/platform/keys/rotate-keys.ts"
import { eventually } from "../support/eventually.ts"

const KEKS = `k1:${Buffer.alloc(32, 7).toString("base64")}`

/** A watch that can be held behind: what it receives meanwhile is taken in once a write waits on it. */
class HeldWatch extends KeyWatch {
  private held: Array<[string, WatchedKey]> | null = null
  hold() {
    this.held = []
  }
  protected override receive(name: string, key: WatchedKey) {
    if (this.held === null) super.receive(name, key)
    else this.held.push([name, key])
  }
  override reached(seq: number, waitMs: number) {
    const reached = super.reached(seq, waitMs)
    const held = this.held ?? []
    this.held = null
    for (const [name, key] of held) super.receive(name, key)
    return reached
  }
}

let server: NatsServerProcess
const connections: NatsConnection[] = []

/** A key store of its own connection, as another process has it. */
const storeOf = async () => {
  const nc = await connect({ servers: server.url })
  connections.push(nc)
  const kv = await openKeyBucket(jetstream(nc), 1)
  return { nc, store: new ContentKeyStore(kv, await jetstreamManager(nc), parseKeyEncryptionKeys(KEKS), Date.now) }
}

/** A writer whose watch follows the bucket, with an agent whose key it has made and read back. */
const writerWithAgent = async (agentId: string) => {
  const { store } = await storeOf()
  const watch = new HeldWatch(KEY_STREAM)
  await store.follow(watch)
  expect(await store.forWrite({ agentId, entryId: "first" }, true)).not.toBeNull()
  await eventually("the writer's watch to read the agent's key", async () =>
    watch.get(agentKeyName(agentId)) !== undefined ? true : undefined,
  )
  return { store, watch }
}

beforeAll(async () => {
  server = await startNatsServer()
})

afterAll(async () => {
  for (const nc of connections) await nc.close()
  await server?.stop()
})

it("an entry key made while the writer's watch is behind a rotation is wrapped under the agent's new key", async () => {
  const writer = await writerWithAgent("rotated")
  writer.watch.hold()
  const operator = await storeOf()
  expect((await rotateKeys(operator.nc, operator.store)).agents).toBe(1)

  const key = await writer.store.forWrite({ agentId: "rotated", entryId: "during" }, true)
  expect(key).not.toBeNull()
  // Another process, with nothing in memory, opens it: the generation that wraps it is one the agent lists.
  const reader = await storeOf()
  expect(await reader.store.forRead({ agentId: "rotated", entryId: "during" })).toEqual(key)
  expect(await reader.store.forRead({ agentId: "rotated", entryId: "first" })).not.toBeNull()
  await writer.store.stop()
})

it("a write while the writer's watch is behind the agent's forget is refused, and its key is not left to open", async () => {
  const writer = await writerWithAgent("forgotten")
  writer.watch.hold()
  const operator = await storeOf()
  await destroyContentKeys(operator.nc, forgetting("forgotten"))

  expect(await writer.store.forWrite({ agentId: "forgotten", entryId: "during" }, true)).toBeNull()
  const reader = await storeOf()
  expect(await reader.store.forRead({ agentId: "forgotten", entryId: "during" })).toBeNull()
  await writer.store.stop()
})

/** An agent's forget, as the eraser's tombstone names it. */
const forgetting = (agentId: string): Tombstone => ({
  _tag: "AgentForgotten",
  v: 1,
  eventId: `forget-${agentId}`,
  agentId,
  at: Date.now(),
  causationId: null,
  correlationId: null,
})

it("a step's focus, and an entry whose key another process made, are not sealed while the writer's watch is behind the agent's forget", async () => {
  const writer = await writerWithAgent("focused")
  const operator = await storeOf()
  expect(await operator.store.forWrite({ agentId: "focused", entryId: "elsewhere" }, true)).not.toBeNull()
  writer.watch.hold()
  await destroyContentKeys(operator.nc, forgetting("focused"))

  expect(await writer.store.forWrite({ agentId: "focused", entryId: null }, false)).toBeNull()
  expect(await writer.store.forWrite({ agentId: "focused", entryId: "elsewhere" }, false)).toBeNull()
  await writer.store.stop()
})

it("a new entry's key made after the key bucket was deleted and made again opens for every process", async () => {
  const writer = await writerWithAgent("rebuilt")
  const operator = await storeOf()
  await (await jetstreamManager(operator.nc)).streams.delete(`KV_${KEY_BUCKET}`)
  await openKeyBucket(jetstream(operator.nc), 1)

  const key = await writer.store.forWrite({ agentId: "rebuilt", entryId: "after" }, true)
  expect(key).not.toBeNull()
  const reader = await storeOf()
  expect(await reader.store.forRead({ agentId: "rebuilt", entryId: "after" })).toEqual(key)
  await writer.store.stop()
})
