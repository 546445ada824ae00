/**
 * A sentence model (the default, all-MiniLM-L6-v2 with int8 weights, or `--model minilm` for its
 * float32 original) in the calling thread against the same model in worker threads (services/platform/embedding/embedder-pool.ts), side by
 * side in one run, on the real model files (`npm run models:fetch`).
 *
 *   npm run bench:embedder-pool [-- --model minilm-int8 --burst 300 --query-every 50 --threads 1,2 --out bench/results/embedder-pool.json]
 *
 * First where the time of one text goes — a long turn (~200 tokens), a short
 * query, a 64 KiB entry — tokenising (JavaScript) against onnxruntime's
 * `session.run`, and whether `run` holds the event loop (a 1 ms interval timer
 * counts how often the loop turned during a series of runs).
 *
 * Then, per mode (in the calling thread; each pool size without and with the worker it keeps
 * for queries), a background burst of long texts is embedded as the fade worker
 * embeds demotions (32 calls in flight, one text each, background priority) while
 * short queries arrive every `--query-every` ms, as a step's focus does (query
 * priority, each text new). Measured: the event loop's delay
 * (perf_hooks.monitorEventLoopDelay) and each query's latency from when it was due
 * — a query due while the loop is held waits for the loop before it is even read —
 * to its answer; and the burst's throughput.
 */
import { readFileSync, writeFileSync } from "node:fs"
import { availableParallelism, cpus, loadavg } from "node:os"
import { join } from "node:path"
import { monitorEventLoopDelay, performance } from "node:perf_hooks"
import { parseArgs } from "node:util"
import { Tokenizer } from "@huggingface/tokenizers"
import * as ort from "onnxruntime-node"
import { settings } from "../contracts/settings.ts"
import type { Embedder } from "../services/platform/embedding/embedder.ts"
import { defaultEmbedderThreads, startEmbedderPool } from "../services/platform/embedding/embedder-pool.ts"
import { loadOnnxEmbedder } from "../services/platform/embedding/onnx-embedder.ts"
import {
  defaultModelsDir,
  missingFiles,
  modelDir,
  SENTENCE_MODELS,
  SETUP_COMMAND,
  sentenceModel,
} from "../services/platform/embedding/sentence-models.ts"

const { values } = parseArgs({
  options: {
    model: { type: "string", default: settings.WM_EMBEDDER.default },
    burst: { type: "string", default: "300" },
    "query-every": { type: "string", default: "50" },
    threads: { type: "string" },
    out: { type: "string", default: "bench/results/embedder-pool.json" },
  },
})
const burst = Number(values.burst)
const queryEvery = Number(values["query-every"])
/** Pool sizes to run, e.g. `1,2` (default: WM_EMBEDDER_THREADS's default here). */
const poolSizes = values.threads === undefined ? [defaultEmbedderThreads()] : values.threads.split(",").map(Number)

const chosen = sentenceModel(values.model!)
if (chosen === undefined) {
  console.error(
    `--model: '${values.model}' is not a sentence model (known: ${SENTENCE_MODELS.map((m) => m.id).join(", ")})`,
  )
  process.exit(2)
}
const model = chosen
const dir = modelDir(model, defaultModelsDir())
if (missingFiles(dir).length > 0) {
  console.error(`the model files are not in ${dir}: run \`${SETUP_COMMAND}\` first (or set WM_MODELS_DIR)`)
  process.exit(1)
}

const WORDS =
  "the launch plan was agreed with the design team after a long discussion about budgets deadlines and the risks of shipping early while customers wait for features".split(
    " ",
  )
/** About 1,200 characters, some 200 tokens: a long conversation turn. */
const longText = (i: number) =>
  `${Array.from({ length: 190 }, (_, k) => WORDS[(i * 7 + k * 13) % WORDS.length]).join(" ")} (remark ${i})`
const shortText = (i: number) => `When did the team agree on launch number ${i}?`
const PROSE = "The delivery was moved to Thursday because the warehouse in Porto closed early for the holiday. "
/** 64 KiB of sentences (the largest entry the API takes), tokenised whole before it is cut to 256 tokens. */
const largestText = (i: number) => `Report ${i}. ${PROSE.repeat(700)}`.slice(0, 65_536)

const round = (x: number, digits = 2) => Number(x.toFixed(digits))
const percentile = (xs: ReadonlyArray<number>, p: number) => {
  if (xs.length === 0) return Number.NaN
  const sorted = [...xs].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!
}

// ---------------------------------------------------------------------------
// Where the time of one text goes

const breakdown = async () => {
  const tokenizer = new Tokenizer(
    JSON.parse(readFileSync(join(dir, "tokenizer.json"), "utf8")),
    JSON.parse(readFileSync(join(dir, "tokenizer_config.json"), "utf8")),
  )
  const session = await ort.InferenceSession.create(join(dir, "model.onnx"), {
    intraOpNumThreads: 1,
    interOpNumThreads: 1,
    executionMode: "sequential",
    graphOptimizationLevel: "all",
  })
  const ids = (text: string) => {
    const all = tokenizer.encode(text).ids
    return all.length <= model.maxTokens ? all : [...all.slice(0, model.maxTokens - 1), all[all.length - 1]!]
  }
  const run = (tokens: ReadonlyArray<number>) => {
    const flat = BigInt64Array.from(tokens.map(BigInt))
    const dims = [1, tokens.length]
    return session.run({
      input_ids: new ort.Tensor("int64", flat, dims),
      attention_mask: new ort.Tensor("int64", new BigInt64Array(flat.length).fill(1n), dims),
      token_type_ids: new ort.Tensor("int64", new BigInt64Array(flat.length), dims),
    })
  }
  for (let i = 0; i < 10; i++) await run(ids(longText(i)))
  const per = async (make: (i: number) => string, n: number) => {
    let tokenise = 0
    let inference = 0
    let tokens = 0
    for (let i = 0; i < n; i++) {
      const t0 = performance.now()
      const t = ids(make(10_000 + i))
      const t1 = performance.now()
      await run(t)
      inference += performance.now() - t1
      tokenise += t1 - t0
      tokens += t.length
    }
    return { texts: n, tokens: round(tokens / n, 1), tokeniseMs: round(tokenise / n, 3), runMs: round(inference / n) }
  }
  const long = await per(longText, 60)
  const short = await per(shortText, 200)
  const largest = await per(largestText, 10)
  // Does run hold the loop? A 1 ms timer turns about once per ms while the loop is free.
  const runs = 30
  const tokens = ids(longText(1))
  const delay = monitorEventLoopDelay({ resolution: 1 })
  let turns = 0
  const timer = setInterval(() => turns++, 1)
  delay.enable()
  const t0 = performance.now()
  for (let i = 0; i < runs; i++) await run(tokens)
  const elapsed = performance.now() - t0
  delay.disable()
  clearInterval(timer)
  await session.release()
  return {
    long,
    short,
    largest,
    runHoldsTheLoop: {
      runs,
      elapsedMs: round(elapsed, 1),
      timerTurns: turns,
      loopDelayMaxMs: round(delay.max / 1e6),
      loopDelayP50Ms: round(delay.percentile(50) / 1e6),
    },
  }
}

// ---------------------------------------------------------------------------
// A background burst with queries arriving meanwhile

interface ModeResult {
  readonly threads: number
  readonly burst: { readonly texts: number; readonly ms: number; readonly textsPerSec: number }
  readonly eventLoopDelayMs: { readonly p50: number; readonly p99: number; readonly max: number }
  readonly queryLatencyMs: { readonly count: number; readonly p50: number; readonly p99: number; readonly max: number }
}

let queryCounter = 0
const scenario = async (embedder: Embedder, threadCount: number): Promise<ModeResult> => {
  // warm: the first calls pay for allocations
  await embedder.embed([longText(-1), shortText(-1)])
  const texts = Array.from({ length: burst }, (_, i) => longText(queryCounter * 1000 + i))
  const latencies: number[] = []
  const answers: Promise<unknown>[] = []
  const delay = monitorEventLoopDelay({ resolution: 1 })
  delay.enable()
  const start = performance.now()
  // queries due every `queryEvery` ms; each is read when the loop gets to it
  let due = start + queryEvery
  let timer: NodeJS.Timeout
  const ask = () => {
    const now = performance.now()
    for (; due <= now; due += queryEvery) {
      const dueAt = due
      answers.push(
        embedder.embed([shortText(++queryCounter * 7919)]).then(() => latencies.push(performance.now() - dueAt)),
      )
    }
    timer = setTimeout(ask, Math.max(0, due - performance.now()))
  }
  timer = setTimeout(ask, queryEvery)
  let next = 0
  const lane = async () => {
    while (next < texts.length) await embedder.embed([texts[next++]!], { priority: "background" })
  }
  await Promise.all(Array.from({ length: 32 }, lane))
  const ms = performance.now() - start
  clearTimeout(timer)
  await Promise.all(answers)
  delay.disable()
  return {
    threads: threadCount,
    burst: { texts: burst, ms: Math.round(ms), textsPerSec: round(burst / (ms / 1000), 1) },
    eventLoopDelayMs: {
      p50: round(delay.percentile(50) / 1e6),
      p99: round(delay.percentile(99) / 1e6),
      max: round(delay.max / 1e6),
    },
    queryLatencyMs: {
      count: latencies.length,
      p50: round(percentile(latencies, 50)),
      p99: round(percentile(latencies, 99)),
      max: round(Math.max(...latencies)),
    },
  }
}

const loadBefore = loadavg()[0]!
console.log(`where the time of one text goes (in the calling thread, one intra-op thread)...`)
const where = await breakdown()
console.log(JSON.stringify(where, null, 2))

const runs: Record<string, ModeResult> = {}
console.log(`in the calling thread: ${burst} long texts in the background, a query every ${queryEvery} ms...`)
runs["in-thread"] = await scenario(await loadOnnxEmbedder(model), 0)
console.log(JSON.stringify(runs["in-thread"]))
for (const threads of poolSizes) {
  // Without, then with, the worker kept for queries (the default).
  for (const queryThreads of [0, 1]) {
    const pool = await startEmbedderPool(model, { threads, queryThreads })
    const name = `pool (${threads} thread${threads === 1 ? "" : "s"}${queryThreads > 0 ? " + 1 for queries" : ""})`
    console.log(`${name}: the same...`)
    runs[name] = await scenario(pool, threads + queryThreads)
    console.log(JSON.stringify(runs[name]))
    await pool.close()
  }
}

const result = {
  date: new Date().toISOString(),
  machine: {
    cores: availableParallelism(),
    /** Other work shares the cores: the 1-minute load average before and after the run. */
    loadAverage: { before: round(loadBefore), after: round(loadavg()[0]!) },
    cpu: cpus()[0]?.model ?? "unknown",
    node: process.version,
    onnxruntime: ort.env.versions.common,
  },
  model: model.model,
  settings: { burst, queryEveryMs: queryEvery, backgroundCallsInFlight: 32 },
  breakdown: where,
  runs,
}
writeFileSync(values.out!, `${JSON.stringify(result, null, 2)}\n`)
console.log(`written to ${values.out}`)
