/**
 * `npm run models:fetch` sets a model up once: files converted as this version converts them are kept;
 * files converted another way (int8 weights stored as int8, which onnxruntime multiplies with saturation
 * on CPUs without VNNI) are fetched and converted again.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { conversionOf, setUpModel } from "../../services/platform/embedding/model-setup.ts"
import { MODEL_FILES, modelDir, sentenceModel } from "../../services/platform/embedding/sentence-models.ts"

const model = sentenceModel("minilm-int8")!
const dirs: string[] = []
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
})

/** A models directory holding the model's files, its model.json saying it was converted as `converted`. */
const modelsDirWith = (converted: string): string => {
  const modelsDir = mkdtempSync(join(tmpdir(), "wm-models-"))
  dirs.push(modelsDir)
  const dir = modelDir(model, modelsDir)
  mkdirSync(dir, { recursive: true })
  for (const file of MODEL_FILES) writeFileSync(join(dir, file), "")
  writeFileSync(join(dir, "model.json"), JSON.stringify({ model: model.model, source: model.source, converted }))
  return modelsDir
}

describe("setting a sentence model up", () => {
  it("keeps files converted as this version converts them", () => {
    const modelsDir = modelsDirWith(conversionOf(model))
    expect(setUpModel(model, { modelsDir, python: "/nonexistent/python" })).toEqual({
      dir: modelDir(model, modelsDir),
      fetched: false,
    })
  })

  it("fetches and converts again files whose int8 weights were stored the old way", () => {
    const modelsDir = modelsDirWith("bert-onnx opset 17, int8 weights per channel")
    // The fetch is attempted (with a Python that does not exist here, so it fails): nothing is kept as it was.
    expect(() => setUpModel(model, { modelsDir, python: "/nonexistent/python" })).toThrow()
  })
})
