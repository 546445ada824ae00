/**
 * With QDRANT_URL set, the suites run on Qdrant: each test file (its own worker process) writes under a
 * collection prefix of its own, so one file's agents never appear in another's collections.
 */
import { randomBytes } from "node:crypto"

if ((process.env.QDRANT_URL ?? "").trim() !== "" && process.env.WM_QDRANT_COLLECTION_PREFIX === undefined)
  process.env.WM_QDRANT_COLLECTION_PREFIX = `wm_t${randomBytes(5).toString("hex")}_`
