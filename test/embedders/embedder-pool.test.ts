/**
 * The sentence model in worker threads (embedder-pool.ts): a model whose files
 * are absent or unusable fails starting with the same typed errors as in
 * process; and — on the real all-MiniLM-L6-v2 files set up by
 * `npm run models:fetch` (CI fetches them before the tests) — its vectors are the
 * in-thread embedder's bit for bit, concurrent calls each get their own texts'
 * vectors, a query queued behind a large background batch is answered before the
 * batch, a lane past its bound refuses, and closing (or only being idle) leaves
 * nothing running that would keep a process alive. Ordering is asserted on the
 * order calls are answered in, never on timings.
 */
import { execFile } from "node:child_process"
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { promisify } from "node:util"
import { ConfigProvider, Effect, Exit, Layer } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { Embedder } from "../../services/platform/embedding/embedder.ts"
import {
  BACKGROUND_NICE,
  defaultEmbedderThreads,
  EmbedderClosed,
  EmbedderOverloaded,
  type EmbedderPool,
  startEmbedderPool,
} from "../../services/platform/embedding/embedder-pool.ts"
import { EmbeddingProvider, type EmbeddingProviderShape } from "../../services/platform/embedding/embedding-provider.ts"
import { loadOnnxEmbedder } from "../../services/platform/embedding/onnx-embedder.ts"
import {
  defaultModelsDir,
  ModelFilesMissing,
  ModelLoadFailed,
  missingFiles,
  modelDir,
  sentenceModel,
} from "../../services/platform/embedding/sentence-models.ts"

const minilm = sentenceModel("minilm")!
const emptyDir = () => mkdtempSync(join(tmpdir(), "wm-models-empty-"))
const bits = (v: Float32Array) => Array.from(new Uint32Array(v.buffer, v.byteOffset, v.length))

const WORDS =
  "the launch plan was agreed with the design team after a long discussion about budgets deadlines and the risks of shipping early while customers wait for features".split(
    " ",
  )
/** About 1,200 characters, over 200 tokens: a pool task carries one such text. */
const longText = (i: number) =>
  `${Array.from({ length: 190 }, (_, k) => WORDS[(i * 7 + k * 13) % WORDS.length]).join(" ")} (remark ${i})`
const shortText = (i: number) => `When did the team agree on launch number ${i}?`

describe("the pool, when the model cannot be loaded", () => {
  it("fails starting with ModelFilesMissing before any worker starts", async () => {
    const dir = emptyDir()
    try {
      const error = await startEmbedderPool(minilm, { modelsDir: dir, threads: 1 }).catch((e: unknown) => e)
      expect(error).toBeInstanceOf(ModelFilesMissing)
      expect((error as ModelFilesMissing).dir).toBe(join(dir, "minilm"))
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it("fails starting with ModelLoadFailed, saying why, when a worker cannot load the files", async () => {
    const dir = emptyDir()
    try {
      const files = join(dir, "minilm")
      mkdirSync(files)
      for (const f of ["model.onnx", "tokenizer.json", "tokenizer_config.json"])
        writeFileSync(join(files, f), "not what it should be")
      writeFileSync(join(files, "model.json"), JSON.stringify({ model: minilm.model, source: minilm.source }))
      const error = await startEmbedderPool(minilm, { modelsDir: dir, threads: 2 }).catch((e: unknown) => e)
      expect(error).toBeInstanceOf(ModelLoadFailed)
      expect((error as ModelLoadFailed).message).toContain(`embedding model 'minilm' in ${files} cannot be loaded`)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it("defaults to one thread fewer than the cores, at least one and at most four", () => {
    expect([1, 2, 3, 8, 64].map((cores) => defaultEmbedderThreads(cores))).toEqual([1, 1, 2, 4, 4])
  })
})

// ---------------------------------------------------------------------------
// The real model files (set up by `npm run models:fetch`; CI fetches them before the tests)

const realDir = defaultModelsDir()
describe.runIf(missingFiles(modelDir(minilm, realDir)).length === 0 || process.env.CI !== undefined)(
  "all-MiniLM-L6-v2 in worker threads, on its real files",
  () => {
    let direct: Embedder
    let pool: EmbedderPool
    beforeAll(async () => {
      direct = await loadOnnxEmbedder(minilm)
      pool = await startEmbedderPool(minilm, { threads: 2 })
    }, 60_000)
    afterAll(() => pool?.close())

    it("gives the in-thread embedder's vectors bit for bit, in either lane", async () => {
      const texts = [
        "Caroline went to the LGBTQ support group yesterday.",
        "",
        "ok",
        "word ".repeat(600),
        "Ünïcödé — 東京で会いましょう 🙂",
        longText(1),
        shortText(1),
      ]
      const expected = await direct.embed(texts)
      const [asQuery, asBackground] = await Promise.all([
        pool.embed(texts),
        pool.embed(
          [...texts].reverse().map((t) => `${t} `),
          { priority: "background" },
        ),
      ])
      const expectedBackground = await direct.embed([...texts].reverse().map((t) => `${t} `))
      expect(pool.model).toBe(direct.model)
      expect(pool.dims).toBe(384)
      expect(asQuery.map(bits)).toEqual(expected.map(bits))
      expect(asBackground.map(bits)).toEqual(expectedBackground.map(bits))
    })

    it("answers many concurrent calls of both lanes, each with its own texts' vectors", async () => {
      const calls = Array.from({ length: 40 }, (_, c) =>
        Array.from({ length: 1 + (c % 5) }, (_, k) =>
          k % 2 === 0 ? shortText(100 + c * 10 + k) : longText(c * 10 + k),
        ),
      )
      const answers = await Promise.all(
        calls.map((texts, c) => pool.embed(texts, { priority: c % 3 === 0 ? "query" : "background" })),
      )
      const expected = await direct.embed(calls.flat())
      expect(answers.flat().map(bits)).toEqual(expected.map(bits))
      expect(pool.stats()).toEqual({ threads: 2, queryThreads: 1, busy: 0, queued: { query: 0, background: 0 } })
    }, 120_000)

    it("answers a query submitted behind a large background batch before the batch", async () => {
      const one = await startEmbedderPool(minilm, { threads: 1 })
      try {
        const answered: string[] = []
        let backgroundLeft = -1
        const batch = one
          .embed(
            Array.from({ length: 24 }, (_, i) => longText(1000 + i)),
            { priority: "background" },
          )
          .then(() => answered.push("background batch"))
        // demotions as the fade worker sends them: one text per call
        const singles = Promise.all(
          Array.from({ length: 8 }, (_, i) =>
            one.embed([longText(2000 + i)], { priority: "background" }).then(() => answered.push(`background ${i}`)),
          ),
        )
        expect(one.stats().queued.background).toBeGreaterThan(20)
        const query = one.embed([shortText(3000)]).then(([vector]) => {
          answered.push("query")
          backgroundLeft = one.stats().queued.background
          return vector!
        })
        const [vector] = await Promise.all([query, batch, singles])
        expect(answered[0]).toBe("query")
        expect(answered.slice(1)).toEqual([
          "background batch",
          ...Array.from({ length: 8 }, (_, i) => `background ${i}`),
        ])
        // when the query was answered, nearly all the batch was still waiting
        expect(backgroundLeft).toBeGreaterThan(20)
        expect(bits(vector)).toEqual(bits((await direct.embed([shortText(3000)]))[0]!))
      } finally {
        await one.close()
      }
    }, 120_000)

    it("answers a query at once while the background work holds every worker of both lanes", async () => {
      const one = await startEmbedderPool(minilm, { threads: 1, batchSize: 1 })
      try {
        const answered: string[] = []
        // Started at once on the worker of both lanes: a long text, the model's longest inference.
        const background = one
          .embed([`${longText(4000)} ${"word ".repeat(600)}`], { priority: "background" })
          .then(() => answered.push("background"))
        expect(one.stats()).toMatchObject({ busy: 1, queued: { background: 0 } })
        const query = one.embed(["ok"]).then(() => answered.push("query"))
        await Promise.all([background, query])
        expect(answered).toEqual(["query", "background"])
      } finally {
        await one.close()
      }
    }, 120_000)

    it.runIf(process.platform === "linux")(
      "runs its workers of background work niced, below the threads serving requests",
      async () => {
        const niced = () =>
          readdirSync("/proc/self/task").filter((tid) => {
            const stat = readFileSync(`/proc/self/task/${tid}/stat`, "utf8")
            // the fields after the command name (which may hold spaces); the nice value is the 17th of them
            return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[16]) === BACKGROUND_NICE
          }).length
        const before = niced()
        const one = await startEmbedderPool(minilm, { threads: 1, queryThreads: 1 })
        try {
          await one.embed(["ok"], { priority: "background" })
          expect(niced()).toBeGreaterThan(before)
        } finally {
          await one.close()
        }
        expect(niced()).toBe(before)
      },
      120_000,
    )

    it("takes no query worker when asked for none: a query then waits for the running task", async () => {
      const one = await startEmbedderPool(minilm, { threads: 1, queryThreads: 0, batchSize: 1 })
      try {
        const answered: string[] = []
        const background = one
          .embed([`${longText(4001)} ${"word ".repeat(600)}`], { priority: "background" })
          .then(() => answered.push("background"))
        const query = one.embed(["ok"]).then(() => answered.push("query"))
        await Promise.all([background, query])
        expect(answered).toEqual(["background", "query"])
        expect(one.stats()).toEqual({ threads: 1, queryThreads: 0, busy: 0, queued: { query: 0, background: 0 } })
      } finally {
        await one.close()
      }
    }, 120_000)

    it("embeds a text asked for again while it waits once, and a query for it moves it ahead of the background lane", async () => {
      // One worker for both lanes, so the order it takes the lanes in shows.
      const one = await startEmbedderPool(minilm, { threads: 1, queryThreads: 0, batchSize: 1 })
      try {
        const answered: string[] = []
        // the background lane as a step leaves it: many recorded entries waiting, each a task of its own
        const recorded = Array.from({ length: 12 }, (_, i) => longText(5000 + i))
        const background = recorded.map((text, i) =>
          one.embed([text], { priority: "background" }).then((v) => {
            answered.push(`background ${i}`)
            return v[0]!
          }),
        )
        const waiting = one.stats().queued.background
        expect(waiting).toBe(11)
        // asked again in the background lane: nothing more is queued
        const again = one.embed([recorded[10]!, recorded[11]!], { priority: "background" })
        expect(one.stats().queued.background).toBe(waiting)
        // a query for the last entry and a new text: the entry's task moves to the query lane, the text joins it there
        const query = one.embed([recorded[11]!, shortText(5100)]).then((v) => {
          answered.push("query")
          return v
        })
        expect(one.stats().queued).toEqual({ query: 2, background: waiting - 1 })
        const [vectors, againVectors, ...backgroundVectors] = await Promise.all([query, again, ...background])
        // the first background task was with the worker already; the moved task and the query's own came next
        expect(answered.slice(0, 3)).toEqual(["background 0", "background 11", "query"])
        const expected = await direct.embed([...recorded, shortText(5100)])
        expect(backgroundVectors.map(bits)).toEqual(expected.slice(0, 12).map(bits))
        expect(vectors.map(bits)).toEqual([expected[11]!, expected[12]!].map(bits))
        expect(againVectors.map(bits)).toEqual([expected[10]!, expected[11]!].map(bits))
        // each caller has its own copy: changing one answer changes no other
        vectors[0]!.fill(0)
        expect(bits(againVectors[1]!)).toEqual(bits(expected[11]!))
        expect(one.stats()).toEqual({ threads: 1, queryThreads: 0, busy: 0, queued: { query: 0, background: 0 } })
      } finally {
        await one.close()
      }
    }, 120_000)

    it("refuses a call that would pass its lane's bound with EmbedderOverloaded, and still serves the other lane", async () => {
      const small = await startEmbedderPool(minilm, { threads: 1, maxQueued: 4, batchSize: 1 })
      try {
        const first = small.embed(
          Array.from({ length: 5 }, (_, i) => longText(4000 + i)),
          { priority: "background" },
        )
        // one text is with the worker, four wait: the lane is full
        expect(small.stats().queued.background).toBe(4)
        const refused = await small.embed([longText(4100)], { priority: "background" }).catch((e: unknown) => e)
        expect(refused).toBeInstanceOf(EmbedderOverloaded)
        expect(refused).toMatchObject({ _tag: "EmbedderOverloaded", lane: "background", queued: 4, texts: 1, bound: 4 })
        const [query] = await small.embed([shortText(4200)])
        expect(bits(query!)).toEqual(bits((await direct.embed([shortText(4200)]))[0]!))
        expect(await first).toHaveLength(5)
        // an empty lane takes a call of any size
        expect(await small.embed(Array.from({ length: 6 }, (_, i) => shortText(4300 + i)))).toHaveLength(6)
      } finally {
        await small.close()
      }
    }, 120_000)

    it("closing fails what is not answered with EmbedderClosed, refuses later calls, and leaves no thread", async () => {
      const ports = () => process.getActiveResourcesInfo().filter((r) => r === "MessagePort").length
      const before = ports()
      const closing = await startEmbedderPool(minilm, { threads: 2 })
      const pending = closing
        .embed(
          Array.from({ length: 12 }, (_, i) => longText(5000 + i)),
          { priority: "background" },
        )
        .catch((e: unknown) => e)
      expect(ports()).toBeGreaterThan(before)
      await closing.close()
      expect(await pending).toBeInstanceOf(EmbedderClosed)
      expect(await closing.embed(["too late"]).catch((e: unknown) => e)).toBeInstanceOf(EmbedderClosed)
      expect(closing.stats()).toEqual({ threads: 0, queryThreads: 0, busy: 0, queued: { query: 0, background: 0 } })
      expect(ports()).toBe(before)
    }, 60_000)

    it("does not keep a process alive: one that embeds and never closes its pool ends by itself", async () => {
      const dir = mkdtempSync(join(tmpdir(), "wm-pool-exit-"))
      try {
        const script = join(dir, "idle-pool.ts")
        const poolModule = join(
          import.meta.dirname,
          "..",
          "..",
          "services",
          "platform",
          "embedding",
          "embedder-pool.ts",
        )
        const modelsModule = join(
          import.meta.dirname,
          "..",
          "..",
          "services",
          "platform",
          "embedding",
          "sentence-models.ts",
        )
        writeFileSync(
          script,
          [
            `import { startEmbedderPool } from ${JSON.stringify(poolModule)}`,
            `import { sentenceModel } from ${JSON.stringify(modelsModule)}`,
            `const pool = await startEmbedderPool(sentenceModel("minilm")!, { threads: 2, modelsDir: ${JSON.stringify(realDir)} })`,
            `const [v] = await pool.embed(["an idle pool does not hold the process"], { priority: "background" })`,
            `console.log("embedded", v!.length)`,
          ].join("\n"),
        )
        // the test's own time limit is the only clock: a process held open would exceed it
        const { stdout } = await promisify(execFile)(process.execPath, [script], { timeout: 100_000 })
        expect(stdout.trim()).toBe("embedded 384")
      } finally {
        rmSync(dir, { recursive: true, force: true })
      }
    }, 120_000)

    it("is what WM_EMBEDDER=minilm serves, WM_EMBEDDER_THREADS sized, held by the provider's layer and closed with it", async () => {
      const build = (env: Record<string, string>) =>
        EmbeddingProvider.fromEnv().pipe(
          Layer.provide(
            ConfigProvider.layer(ConfigProvider.fromUnknown({ WM_EMBEDDER: "minilm", WM_MODELS_DIR: realDir, ...env })),
          ),
        )
      const use = <A>(env: Record<string, string>, f: (provider: EmbeddingProviderShape) => Effect.Effect<A>) =>
        Effect.runPromise(
          Effect.gen(function* () {
            return yield* f(yield* EmbeddingProvider)
          }).pipe(Effect.provide(build(env)), Effect.orDie),
        )
      const [provider, demoted] = await use({ WM_EMBEDDER_THREADS: "1" }, (p) =>
        Effect.map(p.embed(longText(6000)), (d) => [p, d] as const),
      )
      expect(bits(demoted.vector)).toEqual(bits((await direct.embed([longText(6000)]))[0]!))
      expect(provider.offline).toHaveProperty("stats")
      // the layer has ended: its worker threads with it
      expect(await provider.offline.embed(["after the layer"]).catch((e: unknown) => e)).toBeInstanceOf(EmbedderClosed)

      const inThread = await use({ WM_EMBEDDER_THREADS: "0" }, (p) => Effect.succeed(p.offline))
      expect(inThread).not.toHaveProperty("stats")
      expect((await inThread.embed(["after the layer"]))[0]).toHaveLength(384)

      const refused = await Effect.runPromiseExit(Effect.scoped(Layer.build(build({ WM_EMBEDDER_THREADS: "-1" }))))
      expect(Exit.isFailure(refused) && String(refused.cause)).toMatch(/WM_EMBEDDER_THREADS/)
    }, 120_000)
  },
)
