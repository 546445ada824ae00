/**
 * The long-term store contract, against the embedded store (in memory and
 * durable on disk) and the Qdrant adapter in both layouts (shared and
 * per-agent collections) on an in-memory stand-in of Qdrant's API always,
 * and against Qdrant when QDRANT_URL names a server (QDRANT_API_KEY when it
 * needs one). Each Qdrant test writes under a fresh collection prefix, and
 * the run deletes its collections at the end.
 */
import { randomBytes } from "node:crypto"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { QdrantClient } from "@qdrant/js-client-rest"
import { afterAll, beforeAll } from "vitest"
import { QDRANT_COLLECTION_LAYOUTS } from "../../contracts/settings.ts"
import { makeDurableStore } from "../../services/memory/longterm/durable-store.ts"
import { makeEmbeddedStore } from "../../services/memory/longterm/embedded-store.ts"
import { makeQdrantStore } from "../../services/memory/longterm/qdrant-store.ts"
import { describeLongTermStoreContract } from "./longterm-store.contract.ts"
import { InMemoryQdrant } from "./qdrant-in-memory.ts"

describeLongTermStoreContract("embedded", async () => makeEmbeddedStore())

const durableDirs: string[] = []
describeLongTermStoreContract("durable embedded", async () => {
  const dir = mkdtempSync(join(tmpdir(), "wm-longterm-"))
  durableDirs.push(dir)
  return makeDurableStore(dir)
})
afterAll(() => {
  for (const dir of durableDirs) rmSync(dir, { recursive: true, force: true })
})

const standIn = new InMemoryQdrant()
beforeAll(() => standIn.start())
afterAll(() => standIn.stop())
let standInStores = 0
for (const collections of QDRANT_COLLECTION_LAYOUTS)
  describeLongTermStoreContract(`qdrant, ${collections} collections, on an in-memory stand-in`, async () =>
    makeQdrantStore({
      url: standIn.url,
      collectionPrefix: `c${standInStores++}_`,
      collections,
      retryBase: "1 millis",
    }),
  )

const url = process.env.QDRANT_URL?.trim()
if (url) {
  const apiKey = process.env.QDRANT_API_KEY?.trim() || undefined
  const runPrefix = `wmtest_${Date.now().toString(36)}${randomBytes(3).toString("hex")}_`
  let n = 0
  for (const collections of QDRANT_COLLECTION_LAYOUTS)
    describeLongTermStoreContract(`qdrant, ${collections} collections`, async () =>
      makeQdrantStore({ url, apiKey, collectionPrefix: `${runPrefix}${n++}_`, collections, retryBase: "20 millis" }),
    )
  afterAll(async () => {
    const client = new QdrantClient({ url, ...(apiKey ? { apiKey } : {}), checkCompatibility: false })
    const { collections } = await client.getCollections()
    for (const { name } of collections) if (name.startsWith(runPrefix)) await client.deleteCollection(name)
  })
} else {
  console.log(
    "[longterm-store] QDRANT_URL is not set: the contract runs against the embedded stores and the Qdrant adapter on its stand-in, not on a Qdrant server",
  )
}
