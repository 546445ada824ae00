/**
 * Token counts stay exact with the fast byte-pair merge: for long unbroken
 * runs (where it replaces the library's merge) the token ids equal those of
 * an untouched gpt-tokenizer instance, in every supported encoding, and the
 * worst case of the old merge is now fast enough to count at all.
 */

import { createRequire } from "node:module"
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { Encoding } from "../../contracts/agent.ts"
import { MAX_CONTENT_BYTES } from "../../contracts/api.ts"
import { countTokens, encodeTokens, LONG_PIECE_BYTES, tokensAtLeast } from "../../domain/tokens.ts"

const require = createRequire(import.meta.url)
const { GptEncoding } = require("gpt-tokenizer/cjs/GptEncoding") as {
  GptEncoding: {
    getEncodingApi(name: string, ranks: () => unknown): { encode(text: string, options: object): number[] }
  }
}
/** A separate instance of the library with its own, unmodified merge. */
const reference = (encoding: Encoding) => {
  const ranks = (require(`gpt-tokenizer/cjs/bpeRanks/${encoding}`) as { default: unknown }).default
  const api = GptEncoding.getEncodingApi(encoding, () => ranks)
  return (text: string) => api.encode(text, { disallowedSpecial: new Set() })
}

/** Texts with unbroken runs longer than LONG_PIECE_BYTES: few letters (many merges), digits, punctuation, CJK, emoji. */
const longRuns = fc.oneof(
  fc.string({ unit: fc.constantFrom("a", "b", "e", "n", "t"), minLength: LONG_PIECE_BYTES + 1, maxLength: 1_500 }),
  fc.string({ unit: fc.constantFrom("a", "A", "é", "ß", "x"), minLength: LONG_PIECE_BYTES, maxLength: 800 }),
  fc.string({ unit: fc.constantFrom("!", "=", "-", "*", "."), minLength: LONG_PIECE_BYTES + 1, maxLength: 1_000 }),
  fc.string({ unit: fc.constantFrom("汉", "字", "の", "語"), minLength: 50, maxLength: 500 }),
  fc.string({ unit: fc.constantFrom("😀", "👍🏽", "a"), minLength: 40, maxLength: 400 }),
  fc.string({ unit: "binary", minLength: LONG_PIECE_BYTES, maxLength: 600 }),
  fc
    .tuple(
      fc.lorem({ maxCount: 20 }),
      fc.string({ unit: fc.constantFrom("q", "u", "x"), minLength: 200, maxLength: 900 }),
    )
    .map(([words, run]) => `${words} ${run} ${words}`),
)

describe("token counting", () => {
  for (const encoding of Encoding.literals) {
    it(`${encoding}: long runs get exactly the library's token ids`, () => {
      const expected = reference(encoding)
      fc.assert(
        fc.property(longRuns, (text) => {
          expect(encodeTokens(text, encoding)).toEqual(expected(text))
        }),
        { numRuns: 60 },
      )
    })
  }

  it("counts 64 KiB of one repeated letter, and of two letters alternating, exactly", () => {
    // Measured with the library's merge: 8 192 and 16 384 tokens, after 3–5 s each.
    expect(countTokens("a".repeat(MAX_CONTENT_BYTES), "o200k_base")).toBe(8_192)
    const alternating = "ab".repeat(MAX_CONTENT_BYTES / 2)
    const ids = encodeTokens(alternating, "o200k_base")
    expect(ids.length).toBe(countTokens(alternating, "o200k_base"))
    // The ids decode back to the text: every part is a real token.
    const { decode } = require("gpt-tokenizer/cjs/encoding/o200k_base") as { decode(ids: number[]): string }
    expect(decode(ids)).toBe(alternating)
  })
})

describe("counting short texts", () => {
  it("gives the library's count in every encoding, the first time and every time after", () => {
    const expected = Object.fromEntries(Encoding.literals.map((e) => [e, reference(e)]))
    const short = fc.oneof(
      fc.string({ maxLength: 24 }),
      fc.string({ unit: fc.constantFrom(" ", "a", "é", "1", "’", "汉", "😀", "\n"), maxLength: 24 }),
      fc.lorem({ maxCount: 3 }).map((w) => ` ${w}`.slice(0, 24)),
    )
    fc.assert(
      fc.property(
        fc.array(fc.tuple(short, fc.constantFrom(...Encoding.literals)), { minLength: 1, maxLength: 20 }),
        (texts) => {
          // Each text twice, in every encoding: a count remembered for one encoding is never given for another.
          for (let round = 0; round < 2; round++)
            for (const [text, first] of texts)
              for (const encoding of [first, ...Encoding.literals])
                expect(countTokens(text, encoding), `${JSON.stringify(text)} in ${encoding}`).toBe(
                  expected[encoding]!(text).length,
                )
        },
      ),
      { numRuns: 40 },
    )
  })
})

describe("the merge cache", () => {
  it("keeps only a few long pieces: distinct 64 KiB runs do not accumulate in memory", () => {
    const { default: api } = require("gpt-tokenizer/cjs/encoding/o200k_base") as {
      default: { bytePairEncodingCoreProcessor: { mergeCache: Map<string, unknown> } }
    }
    countTokens("warm", "o200k_base")
    const cache = api.bytePairEncodingCoreProcessor.mergeCache
    for (let i = 0; i < 100; i++) countTokens(`${i} ${"xy".repeat(2_000 + i)}`, "o200k_base")
    const long = [...cache.keys()].filter((k) => k.length > LONG_PIECE_BYTES)
    expect(long.length).toBeLessThanOrEqual(32)
  })
})

describe("the lower bound of a token count", () => {
  /** Texts mixing words, numbers, punctuation runs, slashes and line breaks, odd whitespace, CJK, emoji and special-token markers. */
  const mixed = fc
    .array(
      fc.oneof(
        fc.constantFrom(
          "word",
          "Words",
          "it's",
          "123456",
          "!!!",
          "?!/",
          "/",
          "//path/to",
          "a/b",
          "<|endoftext|>",
          "日本語の文",
          "😀👍",
          "e.g.",
          "—",
          "\u00a0",
          "\u3000",
          "\t",
          "\r\n",
          "\n\n/",
          "'s",
          "x",
        ),
        fc.string({ maxLength: 12 }),
        fc.constantFrom(" ", "  ", "\n", " \n "),
      ),
      { maxLength: 60 },
    )
    .map((parts) => parts.join(""))

  for (const encoding of Encoding.literals) {
    it(`${encoding}: never exceeds the count`, () => {
      fc.assert(
        fc.property(mixed, (text) => {
          expect(tokensAtLeast(text)).toBeLessThanOrEqual(countTokens(text, encoding))
        }),
        { numRuns: 400 },
      )
    })
  }

  it("counts the runs of non-whitespace that do not open with a slash", () => {
    expect(tokensAtLeast("")).toBe(0)
    expect(tokensAtLeast("  \n ")).toBe(0)
    expect(tokensAtLeast("Book the one by the river.")).toBe(6)
    expect(tokensAtLeast("a\u00a0b\u3000c\td")).toBe(4)
    expect(tokensAtLeast("see !\n/usr and /tmp")).toBe(3)
    const prose = "The hotel by the river has a ramp at its side entrance, and the lift reaches every floor."
    expect(tokensAtLeast(prose)).toBe(prose.split(/\s+/).length)
    expect(countTokens(prose, "o200k_base")).toBeGreaterThanOrEqual(tokensAtLeast(prose))
  })
})
