/**
 * What the token and term caches remember of a text is the piece or word they were asked about, never the
 * text it came from: a long word cut from a 512 KiB tool output and kept as a cache key must not keep the
 * whole output in memory (a V8 substring of 13 characters or more can be a view into its parent).
 */
import { setFlagsFromString } from "node:v8"
import { runInNewContext } from "node:vm"
import { describe, expect, it } from "vitest"
import { terms } from "../../domain/terms.ts"
import { countTokens } from "../../domain/tokens.ts"

setFlagsFromString("--expose-gc")
const collect = runInNewContext("gc") as () => void

const TEXTS = 40
const TEXT_BYTES = 512 * 1024

/** Letters only, so the word stays one piece and one term: a, b, …, z, ba, bb, … */
const lettersOf = (n: number): string => {
  let out = ""
  do {
    out = String.fromCharCode(97 + (n % 26)) + out
    n = Math.floor(n / 26)
  } while (n > 0)
  return out
}

/** A text of its own (no characters shared with another), opening with a long word no vocabulary holds. */
const outputWithRareWord = (i: number): string => {
  const word = `qzxvwplkjh${lettersOf(i)}gfdsmn`
  const line = `${word} returned ${i} rows from the ledger table after the nightly reconciliation job. `
  return line.repeat(Math.ceil(TEXT_BYTES / line.length)).slice(0, TEXT_BYTES)
}

const heapAfterCollecting = (): number => {
  collect()
  collect()
  return process.memoryUsage().heapUsed
}

describe("the token and term caches", () => {
  it("keep no text they were given alive through a long word they remember", () => {
    // Load the encoding and the stemmer first, so what they hold is not counted.
    countTokens("warm up the encoding", "o200k_base")
    terms("warm up the stemmer")
    const before = heapAfterCollecting()
    for (let i = 0; i < TEXTS; i++) {
      const text = outputWithRareWord(i)
      expect(countTokens(text, "o200k_base")).toBeGreaterThan(0)
      expect(terms(text).length).toBeGreaterThan(0)
    }
    const grown = heapAfterCollecting() - before
    // The texts together are 20 MiB; what the caches keep of them is a few kilobytes.
    expect(grown).toBeLessThan((TEXTS * TEXT_BYTES) / 4)
  })
})
