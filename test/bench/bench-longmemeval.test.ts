/**
 * The LongMemEval benchmark: its loader (the official fields, plain or
 * gzipped, a malformed file named with its field), its scoring and loss
 * accounting on a small fixture, and one run end to end. No timing is
 * asserted: benchmarks are not tests.
 */
import { spawnSync } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { gzipSync } from "node:zlib"
import { afterAll, describe, expect, it } from "vitest"
import { TURN_STEP_MS } from "../../bench/quality/dataset.ts"
import { runLongMemEvalBenchmark } from "../../bench/quality/longmemeval.ts"
import {
  LongMemEvalFormatError,
  loadLongMemEval,
  parseLongMemEval,
  parseLongMemEvalDate,
} from "../../bench/quality/longmemeval-dataset.ts"
import { countLosses, emptyLosses, stageOf } from "../../bench/quality/losses.ts"
import { detailsPath, parseBudgets, splitMembers } from "../../bench/quality/options.ts"
import { silentProgress } from "../../bench/quality/report.ts"
import { aggregate, scoreQuestion } from "../../bench/quality/score.ts"

/** Two questions over three sessions listed out of date order, and an abstention question. */
const fixture = () => {
  const sessions = () => [
    [
      { role: "user", content: "I adopted a cat named Miso last week.", has_answer: true },
      { role: "assistant", content: "Congratulations on adopting Miso! Cats love a quiet corner." },
    ],
    [
      { role: "user", content: "Can you suggest a pasta recipe?" },
      { role: "assistant", content: "Try cacio e pepe: pecorino, black pepper, pasta water." },
      { role: "user", content: "   " },
    ],
    [
      { role: "user", content: "Miso now weighs 4 kilograms, the vet said.", has_answer: true },
      { role: "assistant", content: "That is a healthy weight for a young cat." },
    ],
  ]
  const item = (id: string, type: string, question: string, answer: string | number) => ({
    question_id: id,
    question_type: type,
    question,
    answer,
    question_date: "2023/06/10 (Sat) 09:00",
    haystack_session_ids: ["answer_a_1", "sharegpt_b", "answer_a_2"],
    // The first session listed is the latest.
    haystack_dates: ["2023/06/02 (Fri) 18:30", "2023/05/20 (Sat) 10:00", "2023/06/08 (Thu) 08:15"],
    haystack_sessions: sessions(),
    answer_session_ids: ["answer_a_1", "answer_a_2"],
  })
  return [
    item("q-cat", "multi-session", "What is my cat's name and how much does it weigh?", "Miso"),
    item("q-weight", "knowledge-update", "How much does my cat weigh now?", 4),
    item("q-dog_abs", "single-session-user", "What is my dog's name?", "You did not mention a dog."),
  ]
}

const temporary: string[] = []
afterAll(() => {
  for (const dir of temporary) rmSync(dir, { recursive: true, force: true })
})
const tempDir = () => {
  const dir = mkdtempSync(join(tmpdir(), "longmemeval-test-"))
  temporary.push(dir)
  return dir
}

const fieldOf = (value: unknown): string | undefined => {
  try {
    parseLongMemEval(JSON.stringify(value), "/data/lme.json")
  } catch (e) {
    expect(e).toBeInstanceOf(LongMemEvalFormatError)
    expect((e as Error).message).toContain("/data/lme.json")
    return (e as LongMemEvalFormatError).field
  }
  return undefined
}

describe("LongMemEval dates", () => {
  it("reads the official format as UTC, with or without the weekday", () => {
    expect(parseLongMemEvalDate("2023/05/30 (Tue) 23:40")).toBe(Date.UTC(2023, 4, 30, 23, 40))
    expect(parseLongMemEvalDate("2023/05/30 23:40")).toBe(Date.UTC(2023, 4, 30, 23, 40))
    expect(parseLongMemEvalDate("2023/5/3")).toBe(Date.UTC(2023, 4, 3))
  })

  it("refuses what is not such a date", () => {
    for (const text of ["", "May 30, 2023", "2023/02/30 (Thu) 10:00", "2023/05/30 (Tue) 25:00", "2023-05-30"])
      expect(() => parseLongMemEvalDate(text), text).toThrow()
  })
})

describe("LongMemEval loading", () => {
  it("gives one conversation per question: sessions in date order, evidence, evidence sessions, the asking time", () => {
    const set = parseLongMemEval(JSON.stringify(fixture()), "lme.json")
    expect(set.conversations.map((c) => c.name)).toEqual(["q-cat", "q-weight"])
    expect(set.abstentions).toEqual(["q-dog_abs"])
    // The blank turn of the pasta session, in each of the three items.
    expect(set.emptyTurns).toBe(3)
    const c = set.conversations[0]!
    // Date order: the pasta session (listed second), then the first listed, then the third.
    expect(c.turns.map((t) => t.entryId)).toEqual(["s1-0", "s1-1", "s0-0", "s0-1", "s2-0", "s2-1"])
    expect(c.turns.map((t) => t.session)).toEqual([
      "sharegpt_b",
      "sharegpt_b",
      "answer_a_1",
      "answer_a_1",
      "answer_a_2",
      "answer_a_2",
    ])
    const june2 = Date.UTC(2023, 5, 2, 18, 30)
    expect(c.turns[2]!.timestamp).toBe(june2)
    expect(c.turns[3]!.timestamp).toBe(june2 + TURN_STEP_MS)
    // What the user said as heard; what the assistant said under its name.
    expect(c.turns[2]!.content).toBe("I adopted a cat named Miso last week.")
    expect(c.turns[3]!.content).toBe("Assistant: Congratulations on adopting Miso! Cats love a quiet corner.")
    const q = c.questions[0]!
    expect(q).toMatchObject({
      id: "q-cat",
      group: "multi-session",
      answer: "Miso",
      checksAnswer: true,
      evidence: ["s0-0", "s2-0"],
      evidenceSessions: ["answer_a_1", "answer_a_2"],
      askedAt: Date.UTC(2023, 5, 10, 9, 0),
    })
    expect(set.conversations[1]!.questions[0]!.answer).toBe("4")
  })

  it("reads the same questions from a gzipped file, whatever its name", () => {
    const dir = tempDir()
    const text = JSON.stringify(fixture())
    writeFileSync(join(dir, "plain.json"), text)
    writeFileSync(join(dir, "packed.json.gz"), gzipSync(text))
    writeFileSync(join(dir, "packed-without-suffix.json"), gzipSync(text))
    const plain = loadLongMemEval(join(dir, "plain.json"))
    for (const name of ["packed.json.gz", "packed-without-suffix.json"]) {
      const packed = loadLongMemEval(join(dir, name))
      expect(packed.conversations.map((c) => c.turns)).toEqual(plain.conversations.map((c) => c.turns))
      expect(packed.abstentions).toEqual(plain.abstentions)
    }
  })

  it("names the file and the field of a malformed item", () => {
    const without = (field: string) =>
      fixture().map((item, i) => {
        if (i !== 1) return item
        const copy: Record<string, unknown> = { ...item }
        delete copy[field]
        return copy
      })
    expect(fieldOf(without("question"))).toBe("[1].question")
    expect(fieldOf(without("answer"))).toBe("[1].answer")
    expect(fieldOf(without("haystack_sessions"))).toBe("[1].haystack_sessions")
    expect(fieldOf(without("answer_session_ids"))).toBe("[1].answer_session_ids")

    const badRole = fixture()
    ;(badRole[0]!.haystack_sessions[2]![1] as { role: string }).role = "system"
    expect(fieldOf(badRole)).toBe("[0].haystack_sessions[2][1].role")

    const badDate = fixture()
    badDate[0]!.haystack_dates[1] = "last Tuesday"
    expect(fieldOf(badDate)).toBe("[0].haystack_dates[1]")

    const badQuestionDate = fixture()
    badQuestionDate[2]!.question_date = "2023-06-10"
    expect(fieldOf(badQuestionDate)).toBe("[2].question_date")

    const shortDates = fixture()
    shortDates[0]!.haystack_dates.pop()
    expect(fieldOf(shortDates)).toBe("[0].haystack_dates")

    const badFlag = fixture()
    ;(badFlag[1]!.haystack_sessions[0]![0] as { has_answer: unknown }).has_answer = "yes"
    expect(fieldOf(badFlag)).toBe("[1].haystack_sessions[0][0].has_answer")

    const twice = fixture()
    twice[1]!.question_id = "q-cat"
    expect(fieldOf(twice)).toBe("[1].question_id")

    expect(fieldOf({ questions: [] })).toBe("")
    expect(() => parseLongMemEval("[{", "/data/broken.json")).toThrow(/broken\.json.*not valid JSON/)
    const dir = tempDir()
    writeFileSync(join(dir, "cut.json.gz"), gzipSync(JSON.stringify(fixture())).subarray(0, 40))
    expect(() => loadLongMemEval(join(dir, "cut.json.gz"))).toThrow(LongMemEvalFormatError)
  })
})

describe("LongMemEval scoring", () => {
  const c = parseLongMemEval(JSON.stringify(fixture()), "lme.json").conversations[0]!
  const q = c.questions[0]!
  const sessionOf = (id: string) => c.turns.find((t) => t.entryId === id)?.session

  it("counts evidence turns served raw or as key points, raw alone beside it, sessions and the answer", () => {
    const served = {
      text: "I adopted a cat named Miso last week.\n… Miso now weighs 4 kilograms …\n",
      items: [
        { entryId: "s0-0", form: "raw" },
        { entryId: "s2-0", form: "keyPoints" },
        { entryId: "question-1", form: "raw" },
      ],
      tokens: 30,
    }
    expect(scoreQuestion(q, served, sessionOf)).toEqual({
      group: "multi-session",
      evidenceRecall: 1,
      rawEvidenceRecall: 0.5,
      sessionRecall: 1,
      answerInContext: true,
      tokens: 30,
    })
    const summaryOnly = {
      text: "summary: a pasta recipe\n",
      items: [
        { entryId: "s1-1", form: "raw" },
        { entryId: "s2-0", form: "summary" },
      ],
      tokens: 9,
    }
    const score = scoreQuestion(q, summaryOnly, sessionOf)
    expect(score).toMatchObject({ evidenceRecall: 0, rawEvidenceRecall: 0, sessionRecall: 0.5, answerInContext: false })
    expect(aggregate([scoreQuestion(q, served, sessionOf), score])).toMatchObject({
      evidenceRecall: 0.5,
      rawEvidenceRecall: 0.25,
      sessionRecall: 0.75,
      answerInContext: 0.5,
      tokens: 19.5,
    })
  })

  it("says at which stage each unserved evidence turn was lost", () => {
    const state = {
      working: new Set(["s2-0"]),
      cues: new Set(["s1-0"]),
      rank: new Map([
        ["s0-0", 3],
        ["s1-1", 400],
      ]),
      depth: 150,
    }
    expect(stageOf("s0-0", "keyPoints", state)).toBe("served")
    expect(stageOf("s0-0", "summary", state)).toBe("summaryOnly")
    expect(stageOf("s2-0", undefined, state)).toBe("packedOut")
    expect(stageOf("s1-0", undefined, state)).toBe("packedOut")
    expect(stageOf("s0-0", undefined, state)).toBe("notRecalled")
    expect(stageOf("s1-1", undefined, state)).toBe("notRanked")
    expect(stageOf("s0-1", undefined, state)).toBe("notRanked")

    const losses = emptyLosses()
    const rawText = (id: string) => c.turns.find((t) => t.entryId === id)!.content
    // Both evidence turns served, the answer ("Miso") in neither extract: dropped by the key points.
    countLosses(
      losses,
      q,
      {
        text: "… a cat …\n… weighs 4 kilograms …\n",
        items: [
          { entryId: "s0-0", form: "keyPoints" },
          { entryId: "s2-0", form: "keyPoints" },
        ],
      },
      state,
      rawText,
    )
    countLosses(losses, q, { text: "", items: [] }, state, rawText)
    expect(losses).toEqual({
      evidence: 4,
      served: 2,
      notRanked: 0,
      notRecalled: 1,
      packedOut: 1,
      summaryOnly: 0,
      // s0-0 had left working when the question was asked, in both builds.
      faded: 2,
      answerInEvidence: 2,
      keyPointsDropped: 1,
    })
  })
})

describe("bench:longmemeval end to end", () => {
  it("writes the summary in bench:locomo's shape and skips abstention questions", { timeout: 120_000 }, async () => {
    const dir = tempDir()
    const data = join(dir, "lme.json.gz")
    writeFileSync(data, gzipSync(JSON.stringify(fixture())))
    const out = join(dir, "results", "lme.json")
    const lines: string[] = []
    const { summary } = await runLongMemEvalBenchmark({
      data,
      budgets: parseBudgets("64,1024"),
      out,
      print: (l) => lines.push(l),
      progress: silentProgress,
      types: ["multi-session", "knowledge-update"],
    })
    const json = JSON.parse(readFileSync(out, "utf8")) as typeof summary
    expect(json).toEqual(summary)
    expect(Object.keys(json.methods)).toEqual(["working-memory", "fifo", "bm25"])
    expect(json.budgets).toEqual([64, 1024])
    // Every turn fits in 1024 tokens: FIFO and BM25 serve all the evidence and every answer.
    for (const method of ["fifo", "bm25"] as const)
      expect(json.methods[method]["1024"]).toMatchObject({ evidenceRecall: 1, answerInContext: 1, questions: 2 })
    const wm = json.methods["working-memory"]["1024"]!
    expect(wm.questions).toBe(2)
    expect(wm.evidenceRecall).toBe(1)
    expect(wm.sessionRecall).toBe(1)
    const details = JSON.parse(readFileSync(detailsPath(out), "utf8")) as {
      skipped: string[]
      checks: { overLimit: number; tokenMismatches: number }
      byGroup: Record<string, Record<string, Record<string, unknown>>>
      timings: Record<string, { calls: number }>
    }
    expect(details.skipped).toEqual(["q-dog_abs"])
    expect(details.checks).toMatchObject({ overLimit: 0, tokenMismatches: 0 })
    expect(Object.keys(details.byGroup["working-memory"]!["1024"]!)).toEqual(["knowledge-update", "multi-session"])
    // The turns, then each question recorded at its date before its step.
    expect(details.timings.record!.calls).toBe(2 * 6 + 2)
    expect(details.timings.beginStep!.calls).toBe(2)
    expect(details.timings.buildContext!.calls).toBe(4)
    expect(lines).toContain("1 abstention question(s) (_abs) counted and skipped")
  })

  it("fails with the file and the field when the data is malformed", () => {
    const dir = tempDir()
    const broken = fixture()
    ;(broken[1] as Record<string, unknown>).haystack_dates = "2023/06/02"
    writeFileSync(join(dir, "broken.json"), JSON.stringify(broken))
    const run = spawnSync(process.execPath, ["bench/longmemeval.ts", "--data", join(dir, "broken.json")], {
      encoding: "utf8",
      cwd: fileURLToPath(new URL("../..", import.meta.url)),
    })
    expect(run.status).toBe(1)
    expect(run.stderr).toContain("broken.json")
    expect(run.stderr).toContain("[1].haystack_dates")
  })
})

describe("the committed tuning split", () => {
  it("divides each benchmark into a dev part and a held-out part that share nothing, and refuses another name", () => {
    for (const dataset of ["longmemeval", "locomo"] as const) {
      const dev = splitMembers(dataset, "dev")
      const heldOut = splitMembers(dataset, "held-out")
      expect(dev.length).toBeGreaterThan(0)
      expect(heldOut.length).toBeGreaterThan(0)
      expect(dev.filter((id) => heldOut.includes(id))).toEqual([])
    }
    expect(() => splitMembers("locomo", "test")).toThrow(/--split: 'test' is not one of dev, held-out/)
  })
})
