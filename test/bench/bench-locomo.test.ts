/**
 * The LoCoMo benchmark: its parsing, scoring and baseline fills, and one run
 * end to end on a tiny conversation in LoCoMo format. No timing is asserted:
 * benchmarks are not tests.
 */
import { spawnSync } from "node:child_process"
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, describe, expect, it } from "vitest"
import { bm25Index, fifoFill, rankedFill } from "../../bench/quality/baselines.ts"
import { runLocomoBenchmark } from "../../bench/quality/locomo.ts"
import {
  entryIdOf,
  hasLocomoShape,
  LocomoFormatError,
  parseConversation,
  parseLocomoFile,
  parseSessionDateTime,
  splitEvidence,
  TURN_STEP_MS,
  turnContent,
} from "../../bench/quality/locomo-dataset.ts"
import { detailsPath, parseBudgets } from "../../bench/quality/options.ts"
import { silentProgress } from "../../bench/quality/report.ts"
import { aggregate, answerAppears, evidenceRecall, normaliseText, scoreQuestion } from "../../bench/quality/score.ts"
import { blockTokens } from "../../domain/render.ts"

/** A tiny conversation: two sessions, questions of every category. */
const tinyConversation = () => ({
  speaker_a: "Caroline",
  speaker_b: "Melanie",
  session_1_date_time: "1:56 pm on 8 May, 2023",
  session_1: [
    { speaker: "Caroline", dia_id: "D1:1", text: "I went to the LGBTQ support group yesterday." },
    {
      speaker: "Melanie",
      dia_id: "D1:2",
      text: "That is wonderful! I painted a sunrise in 2022.",
      blip_caption: "a photo of a painted sunrise over a lake",
    },
    { speaker: "Caroline", dia_id: "D1:3", text: "I want to study counseling next year." },
  ],
  session_2_date_time: "10:04 am on 19 June, 2023",
  session_2: [
    { speaker: "Melanie", dia_id: "D2:1", text: "We went camping at the beach with the kids." },
    { speaker: "Caroline", dia_id: "D2:2", text: "My counseling course starts in September." },
  ],
  qa: [
    { question: "When did Melanie paint a sunrise?", answer: 2022, evidence: ["D1:2"], category: 2 },
    {
      question: "What does Caroline study and when does it start?",
      answer: "counseling",
      evidence: ["D1:3; D2:2", "D7:7"],
      category: 1,
    },
    { question: "Where did Melanie go camping?", answer: "the beach", evidence: ["D2:1"], category: 4 },
    { question: "Would Caroline enjoy helping people?", answer: "Likely yes", evidence: [], category: 3 },
    { question: "What did Melanie paint in 2021?", adversarial_answer: "a sunset", evidence: ["D1:2"], category: 5 },
  ],
})

const temporary: string[] = []
afterAll(() => {
  for (const dir of temporary) rmSync(dir, { recursive: true, force: true })
})
const tempDir = () => {
  const dir = mkdtempSync(join(tmpdir(), "locomo-test-"))
  temporary.push(dir)
  return dir
}

describe("session dates", () => {
  it("reads LoCoMo's format as UTC", () => {
    expect(parseSessionDateTime("1:56 pm on 8 May, 2023")).toBe(Date.UTC(2023, 4, 8, 13, 56))
    expect(parseSessionDateTime("10:04 am on 19 June, 2023")).toBe(Date.UTC(2023, 5, 19, 10, 4))
    expect(parseSessionDateTime("12:09 am on 13 September, 2023")).toBe(Date.UTC(2023, 8, 13, 0, 9))
    expect(parseSessionDateTime("12:30 pm on 1 January, 2024")).toBe(Date.UTC(2024, 0, 1, 12, 30))
    expect(parseSessionDateTime("  7:05 PM on 31 Dec 2022 ")).toBe(Date.UTC(2022, 11, 31, 19, 5))
  })

  it("takes other common spellings", () => {
    expect(parseSessionDateTime("8 May, 2023")).toBe(Date.UTC(2023, 4, 8))
    expect(parseSessionDateTime("May 8, 2023 1:56 p.m.")).toBe(Date.UTC(2023, 4, 8, 13, 56))
    expect(parseSessionDateTime("3 pm on 2 Sept 2023")).toBe(Date.UTC(2023, 8, 2, 15, 0))
    expect(parseSessionDateTime("13:56 on 8 May 2023")).toBe(Date.UTC(2023, 4, 8, 13, 56))
    expect(parseSessionDateTime("2023-05-08 13:56")).toBe(Date.UTC(2023, 4, 8, 13, 56))
  })

  it("refuses what is not a date", () => {
    for (const text of [
      "",
      "soon",
      "1:56 pm on 31 February, 2023",
      "13:56 pm on 8 May, 2023",
      "1:56 pm on 8 May",
      "8 Smarch 2023",
    ]) {
      expect(() => parseSessionDateTime(text), text).toThrow()
    }
  })
})

describe("dataset", () => {
  it("splits evidence strings holding several ids, without repeats", () => {
    expect(splitEvidence(["D8:6; D9:17", "D1:3", "D1:3 D2:4", " D", ""])).toEqual([
      "D8:6",
      "D9:17",
      "D1:3",
      "D2:4",
      "D",
    ])
  })

  it("derives entry ids that are valid request ids", () => {
    expect(entryIdOf("D3:5")).toBe("D3-5")
    expect(entryIdOf("D:11:26")).toBe("D-11-26")
    expect(entryIdOf("x".repeat(100))).toMatch(/^[A-Za-z0-9_-]{1,64}$/)
  })

  it("writes a turn with its shared photo", () => {
    expect(turnContent("Mel", "Look!", "a dog on a beach")).toBe("Mel: Look! [shares a photo: a dog on a beach]")
    expect(turnContent("Mel", "Hi", undefined)).toBe("Mel: Hi")
  })

  it("parses a conversation: turns in order at their session's time, evidence mapped to entry ids", () => {
    const c = parseConversation(tinyConversation(), "tiny.json", "tiny.json")
    expect(c.turns.map((t) => t.entryId)).toEqual(["D1-1", "D1-2", "D1-3", "D2-1", "D2-2"])
    const start = Date.UTC(2023, 4, 8, 13, 56)
    expect(c.turns.slice(0, 3).map((t) => t.timestamp)).toEqual([start, start + TURN_STEP_MS, start + 2 * TURN_STEP_MS])
    expect(c.turns[3]!.timestamp).toBe(Date.UTC(2023, 5, 19, 10, 4))
    expect(c.turns[1]!.content).toBe(
      "Melanie: That is wonderful! I painted a sunrise in 2022. [shares a photo: a photo of a painted sunrise over a lake]",
    )
    const t = c.turns[1]!
    expect(t.tokens).toBe(blockTokens({ timestamp: t.timestamp, origin: "USER" }, "raw", t.content, "o200k_base"))
    expect(c.questions[0]!.answer).toBe("2022")
    expect(c.questions[1]!.evidence).toEqual(["D1-3", "D2-2"])
    expect(c.questions[1]!.unknownEvidence).toEqual(["D7:7"])
    expect(c.questions[4]!.answer).toBeNull()
  })

  it("tells LoCoMo files from others, flat or nested, one sample or several", () => {
    const flat = tinyConversation()
    const { qa, ...conversation } = flat
    const nested = { sample_id: "conv-x", conversation, qa }
    expect(hasLocomoShape(flat)).toBe(true)
    expect(hasLocomoShape(nested)).toBe(true)
    expect(hasLocomoShape({ name: "package", version: "1.0.0" })).toBe(false)
    expect(parseLocomoFile(JSON.stringify({ name: "x" }), "other.json")).toBeNull()
    const many = parseLocomoFile(JSON.stringify([nested, { ...nested, sample_id: "conv-y" }]), "/d/locomo10.json")!
    expect(many.map((c) => c.name)).toEqual(["locomo10.json#conv-x", "locomo10.json#conv-y"])
    expect(many[0]!.turns).toHaveLength(5)
  })

  it("names the file and the field of a malformed conversation", () => {
    const missingDate: Record<string, unknown> = tinyConversation()
    delete missingDate.session_2_date_time
    const error = (value: unknown) => {
      try {
        parseLocomoFile(JSON.stringify(value), "/data/conv-9.json")
      } catch (e) {
        return e
      }
      return undefined
    }
    const e1 = error(missingDate)
    expect(e1).toBeInstanceOf(LocomoFormatError)
    expect((e1 as LocomoFormatError).field).toBe("session_2_date_time")
    expect((e1 as Error).message).toContain("/data/conv-9.json")
    expect((e1 as Error).message).toContain("session_2_date_time")

    const badDate = { ...tinyConversation(), session_1_date_time: "sometime in May" }
    expect((error(badDate) as LocomoFormatError).field).toBe("session_1_date_time")

    const duplicate = tinyConversation()
    duplicate.session_2[1]!.dia_id = "D1:1"
    expect((error(duplicate) as LocomoFormatError).field).toBe("session_2[1].dia_id")

    const noAnswer = tinyConversation()
    noAnswer.qa[2] = { question: "Where?", evidence: ["D2:1"], category: 4 } as never
    expect((error(noAnswer) as LocomoFormatError).field).toBe("qa[2].answer")

    const { qa: _, ...withoutQa } = tinyConversation()
    expect(hasLocomoShape(withoutQa)).toBe(false)
    expect((error({ conversation: withoutQa, qa: "none" }) as LocomoFormatError).field).toBe("qa")
    expect(error("just a string")).toBeUndefined()
    expect(() => parseLocomoFile("{ not json", "/data/broken.json")).toThrow(/broken\.json/)
  })
})

describe("scoring", () => {
  it("normalises answers: case, punctuation, articles, whitespace; numbers as text", () => {
    expect(normaliseText("The Lord of the Rings!")).toBe("lord of rings")
    expect(normaliseText("  J.K.  Rowling,\n and an Owl ")).toBe("jk rowling and owl")
    expect(normaliseText(2022)).toBe("2022")
    expect(normaliseText("A")).toBe("")
  })

  it("finds an answer on word boundaries of the normalised context", () => {
    const context = "[2023-05-08 13:56] user: Melanie: We went to the Beach, in 2022!\n"
    expect(answerAppears("the beach", context)).toBe(true)
    expect(answerAppears(2022, context)).toBe(true)
    expect(answerAppears("each", context)).toBe(false)
    expect(answerAppears(13, context)).toBe(false)
    expect(answerAppears("2023", context)).toBe(false)
  })

  it("counts evidence served raw or as key points, not as a summary", () => {
    const items = [
      { entryId: "D1-1", form: "raw" },
      { entryId: "D1-2", form: "keyPoints" },
      { entryId: "D1-3", form: "summary" },
    ]
    expect(evidenceRecall(["D1-1", "D1-2", "D1-3", "D2-1"], { text: "", items })).toBe(0.5)
    expect(evidenceRecall([], { text: "", items })).toBeNull()
  })

  it("averages recall over questions with evidence and answers over categories 1, 2 and 4", () => {
    const c = parseConversation(tinyConversation(), "tiny.json", "tiny.json")
    const context = {
      text: "user: Melanie: I painted a sunrise in 2022.",
      items: [{ entryId: "D1-2", form: "raw" }],
      tokens: 12,
    }
    const sessionOf = (id: string) => c.turns.find((t) => t.entryId === id)?.session
    const scores = c.questions.filter((q) => q.category <= 4).map((q) => scoreQuestion(q, context, sessionOf))
    expect(scores.map((s) => s.evidenceRecall)).toEqual([1, 0, 0, null])
    expect(scores.map((s) => s.answerInContext)).toEqual([true, false, false, null])
    // The second question's evidence sits in sessions 1 and 2; the served turn is in session 1.
    expect(scores.map((s) => s.sessionRecall)).toEqual([1, 0.5, 0, null])
    expect(aggregate(scores)).toEqual({
      evidenceRecall: 1 / 3,
      rawEvidenceRecall: 1 / 3,
      sessionRecall: 0.5,
      answerInContext: 1 / 3,
      tokens: 12,
      questions: 4,
      withEvidence: 3,
      withAnswerCheck: 3,
    })
  })
})

describe("baselines", () => {
  it("FIFO takes exactly the last turns that fit, stopping at the first that does not", () => {
    const costs = [5, 7, 3, 4]
    expect(fifoFill(costs, 7)).toEqual([2, 3])
    expect(fifoFill(costs, 6)).toEqual([3])
    expect(fifoFill(costs, 19)).toEqual([0, 1, 2, 3])
    expect(fifoFill(costs, 3)).toEqual([])
    expect(fifoFill([1, 10, 3], 5)).toEqual([2])
  })

  it("a ranked fill takes turns in rank order, skipping one that does not fit", () => {
    expect(rankedFill([1, 0, 2], [2, 10, 3], 6)).toEqual([0, 2])
    expect(rankedFill([2, 0, 1], [2, 2, 2], 4)).toEqual([0, 2])
    expect(rankedFill([], [2, 2], 4)).toEqual([])
  })

  it("BM25 ranks the turns sharing stemmed, non-stop words with the query, best first", () => {
    const index = bm25Index([
      "Caroline: I went to the support group yesterday.",
      "Melanie: The dog barked all night.",
      "Melanie: Painting is my hobby; I painted a sunrise.",
      "Caroline: What a lovely sunrise painting, painting is great.",
      "Melanie: The kids love the beach.",
    ])
    const ranking = index.rank("When did Melanie paint a sunrise?")
    expect(ranking.slice(0, 2).sort()).toEqual([2, 3])
    expect(ranking).not.toContain(0)
    expect(index.rank("the of and")).toEqual([])
    expect(index.rank("support groups")).toEqual([0])
  })

  it("BM25 works on fewer than three turns", () => {
    expect(bm25Index(["Caroline: hello there", "Melanie: painting again"]).rank("painting")).toEqual([1])
    expect(bm25Index([]).rank("painting")).toEqual([])
  })
})

describe("options", () => {
  it("parses budgets", () => {
    expect(parseBudgets("4096, 512,1024,512")).toEqual([512, 1024, 4096])
    expect(() => parseBudgets("512,abc")).toThrow(/abc/)
    expect(() => parseBudgets("8")).toThrow(/at least/)
    expect(() => parseBudgets("")).toThrow()
    expect(detailsPath("bench/results/locomo.json")).toBe("bench/results/locomo.details.json")
  })
})

describe("bench:locomo end to end", () => {
  it("writes exactly the summary JSON for a tiny LoCoMo directory", { timeout: 120_000 }, async () => {
    const data = tempDir()
    writeFileSync(join(data, "conv-1.json"), JSON.stringify(tinyConversation()))
    const { qa, ...conversation } = tinyConversation()
    writeFileSync(join(data, "conv-2.json"), JSON.stringify({ sample_id: "conv-2", conversation, qa: qa.slice(0, 3) }))
    writeFileSync(join(data, "notes.json"), JSON.stringify({ note: "not a conversation" }))
    writeFileSync(join(data, "README.md"), "ignored")
    const out = join(tempDir(), "results", "locomo.json")
    const lines: string[] = []

    // A budget that holds exactly the last two turns (D2:1, D2:2), whatever a turn costs.
    const turns = parseConversation(tinyConversation(), "tiny.json", "tiny.json").turns
    const two = turns[3]!.tokens + turns[4]!.tokens
    expect(two).toBeLessThan(256)
    await runLocomoBenchmark({
      data,
      budgets: parseBudgets(`${two},256`),
      out,
      print: (l) => lines.push(l),
      progress: silentProgress,
    })

    const asked = 4 + 3
    const json = JSON.parse(readFileSync(out, "utf8")) as Record<string, unknown>
    expect(Object.keys(json)).toEqual(["budgets", "methods", "tokensPerConversation", "ceiling"])
    expect(json.budgets).toEqual([two, 256])
    const methods = json.methods as Record<string, Record<string, Record<string, unknown>>>
    expect(Object.keys(methods)).toEqual(["working-memory", "fifo", "bm25"])
    for (const [method, byBudget] of Object.entries(methods)) {
      expect(Object.keys(byBudget), method).toEqual([String(two), "256"])
      for (const [budget, cell] of Object.entries(byBudget)) {
        const where = `${method}@${budget}`
        expect(Object.keys(cell), where).toEqual([
          "evidenceRecall",
          "answerInContext",
          "questions",
          "rawEvidenceRecall",
          "sessionRecall",
          "tokens",
        ])
        for (const key of ["evidenceRecall", "answerInContext", "rawEvidenceRecall", "sessionRecall"]) {
          const value = cell[key]
          expect(typeof value, where).toBe("number")
          expect(value as number, `${where} ${key}`).toBeGreaterThanOrEqual(0)
          expect(value as number, `${where} ${key}`).toBeLessThanOrEqual(1)
        }
        expect(cell.questions, where).toBe(asked)
      }
    }
    const total = turns.reduce((s, t) => s + t.tokens, 0)
    expect(json.tokensPerConversation).toBe(total)
    // The whole conversation fits in 256 tokens: FIFO serves every turn, so every evidence turn and answer.
    expect(total).toBeLessThan(256)
    expect(methods.fifo!["256"]).toMatchObject({
      evidenceRecall: 1,
      answerInContext: 1,
      questions: asked,
      tokens: total,
    })
    // Exactly the last two turns: half the evidence of the multi-id question, all of the camping one,
    // none of the sunrise one; the answers "counseling" and "the beach".
    expect(
      fifoFill(
        turns.map((t) => t.tokens),
        two,
      ),
    ).toEqual([3, 4])
    expect(methods.fifo![String(two)]).toMatchObject({
      evidenceRecall: 0.5,
      rawEvidenceRecall: 0.5,
      answerInContext: 0.6667,
      questions: asked,
      tokens: two,
    })

    expect(existsSync(detailsPath(out))).toBe(true)
    const details = JSON.parse(readFileSync(detailsPath(out), "utf8")) as {
      skipped: string[]
      checks: { tokenMismatches: number; overLimit: number }
      losses: Record<string, { evidence: number; served: number }>
      questions: Array<{ id: string; evidence: Array<{ entryId: string; served: Record<string, string | null> }> }>
    }
    expect(details.skipped).toEqual([join(data, "notes.json")])
    expect(lines).toContain(`skipped ${join(data, "notes.json")}: not a LoCoMo conversation`)
    // Every evidence turn of every asked question is accounted for at every budget, served or lost at a stage.
    const evidenceTurns = 1 + 2 + 1 + (1 + 2 + 1)
    for (const budget of [String(two), "256"]) {
      expect(details.losses[budget]!.evidence).toBe(evidenceTurns)
    }
    expect(details.questions).toHaveLength(asked)
    expect(details.checks.tokenMismatches).toBe(0)
    expect(details.checks.overLimit).toBe(0)
    expect(lines.some((l) => l.startsWith("working-memory"))).toBe(true)
  })

  it("fails with a clear message when the directory holds no LoCoMo file", () => {
    const data = tempDir()
    mkdirSync(join(data, "sub"))
    writeFileSync(join(data, "other.json"), "{}")
    const run = spawnSync(process.execPath, ["bench/locomo.ts", "--data", data], {
      encoding: "utf8",
      cwd: fileURLToPath(new URL("../..", import.meta.url)),
    })
    expect(run.status).toBe(1)
    expect(run.stderr).toContain("no LoCoMo conversation")
  })
})
