/** Where the embedders look for their files when no directory is configured: the repository's .data. */
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { defaultCacheDir } from "../../services/platform/embedding/offline-embedder.ts"
import { defaultModelsDir } from "../../services/platform/embedding/sentence-models.ts"

const repo = join(import.meta.dirname, "..", "..")

describe("default data directories", () => {
  it("put the word-vector cache and the models under the repository's .data", () => {
    const saved = { cache: process.env.WM_CACHE_DIR, models: process.env.WM_MODELS_DIR }
    delete process.env.WM_CACHE_DIR
    delete process.env.WM_MODELS_DIR
    try {
      expect(defaultCacheDir()).toBe(join(repo, ".data", "cache"))
      expect(defaultModelsDir()).toBe(join(repo, ".data", "models"))
    } finally {
      if (saved.cache !== undefined) process.env.WM_CACHE_DIR = saved.cache
      if (saved.models !== undefined) process.env.WM_MODELS_DIR = saved.models
    }
  })
})
