import { Exit, Schema } from "effect"
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { decodeEventJson } from "../../contracts/decode.ts"
import { MemoryEvent } from "../../contracts/events.ts"
import { decodeCommonShape } from "../../contracts/fast-decode.ts"

const schemaDecode = Schema.decodeUnknownExit(MemoryEvent)

// Values at and around the bounds of each field, and of other types.
const token = fc.oneof(fc.stringMatching(/^[A-Za-z0-9_-]{1,64}$/), fc.constantFrom("", "a".repeat(65), "a b", "é"))
const epoch = fc.oneof(
  fc.integer({ min: 0, max: 2 ** 45 }),
  fc.constantFrom(-1, 0.5, 8_640_000_000_000_000, 8_640_000_000_000_001, 2 ** 53),
)
const count = fc.oneof(fc.nat(), fc.constantFrom(-1, 1.5, 2 ** 53))
const nullOrString = fc.oneof(fc.constant(null), fc.string())
const envelope = fc.record({
  v: fc.oneof(fc.constant(1), fc.constantFrom(1, 1, 1, 0, 2, "1")),
  eventId: fc.oneof(fc.string({ minLength: 1, maxLength: 200 }), fc.constantFrom("", "x".repeat(201))),
  agentId: token,
  at: epoch,
  causationId: nullOrString,
  correlationId: nullOrString,
})
const mood = fc.oneof(
  { weight: 4, arbitrary: fc.constant(null) },
  {
    weight: 1,
    arbitrary: fc.record({
      valence: fc.double({ min: -1, max: 1, noNaN: true }),
      arousal: fc.double({ min: 0, max: 1, noNaN: true }),
    }),
  },
)
const focusText = fc.oneof(
  fc.string({ minLength: 1, maxLength: 40 }),
  fc.constantFrom("", "😀".repeat(2_001), "x".repeat(4_001)),
)
const focus = fc.oneof(
  fc.constant(null),
  fc.record({ task: focusText, subgoal: focusText, query: focusText }, { requiredKeys: [] }),
)
const entryRecorded = fc.record({
  _tag: fc.constant("EntryRecorded"),
  entryId: token,
  timestamp: epoch,
  origin: fc.constantFrom("INTERNAL", "USER", "ADVISOR", "SYSTEM", "user"),
  content: fc.string(),
  tags: fc.array(fc.oneof(fc.string(), fc.constant(1 as unknown as string)), { maxLength: 3 }),
  moodSnapshot: mood,
  emotionalWeight: fc.oneof(fc.double({ min: 0, max: 1, noNaN: true }), fc.constantFrom(-0.1, 1.1, -0)),
  tokens: count,
})
const entriesRead = fc.record({
  _tag: fc.constant("EntriesRead"),
  stepId: fc.oneof(fc.constant(null), token),
  budget: fc.oneof(fc.integer({ min: 16, max: 1_000_000 }), fc.constantFrom(15, 1_000_001, 100.5)),
  tokens: count,
  served: fc.array(
    fc.record({
      entryId: token,
      form: fc.constantFrom("raw", "keyPoints", "summary", "full"),
      cue: fc.oneof(fc.boolean(), fc.constant(0)),
    }),
    { maxLength: 4 },
  ),
})
const stepStarted = fc.record({ _tag: fc.constant("StepStarted"), stepId: token, focus })
const stepEnded = fc.record({ _tag: fc.constant("StepEnded"), stepId: token })
const entriesReferenced = fc.record({
  _tag: fc.constant("EntriesReferenced"),
  stepId: token,
  entryIds: fc.array(token, { maxLength: 4 }),
})
const budgetChanged = fc.record({
  _tag: fc.constant("BudgetChanged"),
  reason: fc.constant("retune"),
  baseBudget: fc.integer({ min: 16, max: 5000 }),
  budget: fc.integer({ min: 16, max: 5000 }),
})

/** Mostly a valid value, now and then one the Schema refuses. */
const mostly = <A, B>(valid: fc.Arbitrary<A>, invalid: fc.Arbitrary<B>) =>
  fc.oneof({ weight: 9, arbitrary: valid }, { weight: 1, arbitrary: invalid })
const trigger = mostly(
  fc.constantFrom("explicit-reference", "similarity", "task-transition", "warm-up"),
  fc.constantFrom("recall", 1),
)
const finite = mostly(fc.double({ noNaN: true, noDefaultInfinity: true }), fc.constantFrom(Number.NaN, Infinity, "0.5"))
const recalled = fc.record(
  {
    timestamp: mostly(fc.integer({ min: 0, max: 2 ** 45 }), fc.constantFrom(-1, 0.5, 8_640_000_000_000_001)),
    origin: mostly(fc.constantFrom("INTERNAL", "USER", "ADVISOR", "SYSTEM"), fc.constant("user")),
    tags: fc.array(mostly(fc.string(), fc.constant(1 as unknown as string)), { maxLength: 3 }),
    moodSnapshot: mood,
    emotionalWeight: mostly(fc.double({ min: 0, max: 1, noNaN: true }), fc.constantFrom(-0.1, 1.1, Number.NaN)),
    form: mostly(fc.constantFrom("raw", "keyPoints", "summary"), fc.constant("full")),
    text: mostly(fc.string(), fc.constant(null as unknown as string)),
    tokens: mostly(fc.nat(), fc.constantFrom(-1, 1.5, 2 ** 53)),
    keyPoints: fc.record({ text: mostly(fc.string(), fc.constant(3)), tokens: mostly(fc.nat(), fc.constant(-1)) }),
  },
  { requiredKeys: ["timestamp", "origin", "tags", "moodSnapshot", "emotionalWeight", "form", "text", "tokens"] },
)
const validToken = mostly(fc.stringMatching(/^[A-Za-z0-9_-]{1,64}$/), fc.constantFrom("", "a b"))
const cueRehydrated = fc.record({
  _tag: fc.constant("CueRehydrated"),
  stepId: mostly(fc.stringMatching(/^[A-Za-z0-9_-]{1,64}$/), fc.constant(null as unknown as string)),
  entryId: validToken,
  trigger,
  relevance: finite,
  recalled,
})
const cuePromoted = fc.record({
  _tag: fc.constant("CuePromoted"),
  stepId: fc.oneof(validToken, fc.constant(null)),
  entryId: validToken,
  trigger,
  recalled,
})
const stepRecalled = fc.record({
  _tag: fc.constant("StepRecalled"),
  stepId: validToken,
  trigger,
  similarities: fc.array(fc.record({ entryId: validToken, similarity: finite }), { maxLength: 4 }),
})
const cuesDropped = fc.record({
  _tag: fc.constant("CuesDropped"),
  stepId: validToken,
  entryIds: fc.array(validToken, { maxLength: 4 }),
})

/** A step's recall, its cues, their promotion and drop, in a mostly valid envelope: each field's limits are met often. */
const recallEvent = fc
  .tuple(
    fc.record({
      v: mostly(fc.constant(1), fc.constantFrom(0, 2)),
      eventId: mostly(fc.string({ minLength: 1, maxLength: 200 }), fc.constant("")),
      agentId: validToken,
      at: mostly(fc.integer({ min: 0, max: 2 ** 45 }), fc.constant(-1)),
      causationId: nullOrString,
      correlationId: nullOrString,
    }),
    fc.oneof(cueRehydrated, cuePromoted, stepRecalled, cuesDropped),
  )
  .map(([e, body]) => ({ ...e, ...body }) as Record<string, unknown>)

const event = fc
  .tuple(
    envelope,
    fc.oneof(
      entryRecorded,
      entriesRead,
      stepStarted,
      stepEnded,
      entriesReferenced,
      budgetChanged,
      cueRehydrated,
      cuePromoted,
      stepRecalled,
      cuesDropped,
    ),
  )
  .map(([e, body]) => ({ ...e, ...body }) as Record<string, unknown>)

/** A copy of `event` with one key removed, replaced by any JSON value, or one key added, at the top or one level down. */
const mutated = fc
  .tuple(event, fc.nat(), fc.constantFrom("remove", "replace", "add"), fc.jsonValue())
  .map(([e, pick, how, value]) => {
    const copy = structuredClone(e)
    const nested = Object.values(copy).find((v) => typeof v === "object" && v !== null && !Array.isArray(v)) as
      | Record<string, unknown>
      | undefined
    const listed = [copy.served, copy.similarities].find((l) => Array.isArray(l) && l.length > 0) as
      | Array<Record<string, unknown>>
      | undefined
    const served = listed?.[0]
    const keyPoints =
      nested !== undefined && typeof nested.keyPoints === "object" && nested.keyPoints !== null
        ? (nested.keyPoints as Record<string, unknown>)
        : undefined
    const targets = [copy, ...(nested ? [nested] : []), ...(served ? [served] : []), ...(keyPoints ? [keyPoints] : [])]
    const target = targets[pick % targets.length]!
    const keys = Object.keys(target)
    const key = keys[pick % Math.max(1, keys.length)] ?? "x"
    if (how === "remove") delete target[key]
    else if (how === "replace") target[key] = value
    else target.unexpected = value
    return copy
  })

describe("the fast decoder of common events", () => {
  it("decodes exactly what the Schema decoder decodes, to the same event, on valid and malformed events", () => {
    fc.assert(
      fc.property(fc.oneof(event, mutated), (json) => {
        const reference = schemaDecode(json)
        const fast = decodeCommonShape(json)
        if (fast !== undefined) {
          expect(Exit.isSuccess(reference)).toBe(true)
          expect(fast).toEqual(Exit.isSuccess(reference) ? reference.value : undefined)
        }
        const decoded = decodeEventJson(json)
        expect(decoded.ok).toBe(Exit.isSuccess(reference))
        if (decoded.ok && Exit.isSuccess(reference)) expect(decoded.event).toEqual(reference.value)
      }),
      { numRuns: 3_000 },
    )
  })

  it("decodes a recall's events as the Schema decoder does, at and past each field's limits", () => {
    fc.assert(
      fc.property(recallEvent, (json) => {
        const reference = schemaDecode(json)
        const fast = decodeCommonShape(json)
        if (fast !== undefined) {
          expect(Exit.isSuccess(reference)).toBe(true)
          expect(fast).toEqual(Exit.isSuccess(reference) ? reference.value : undefined)
        } else if (
          Exit.isSuccess(reference) &&
          (json.recalled as { moodSnapshot?: unknown } | undefined)?.moodSnapshot == null
        )
          expect.unreachable(`a valid ${String(json._tag)} without a mood took the Schema's path`)
      }),
      { numRuns: 3_000 },
    )
  })

  it("takes the fast path for every valid event of the common shapes without a mood", () => {
    fc.assert(
      fc.property(event, (json) => {
        const common = [
          "EntryRecorded",
          "EntriesRead",
          "StepStarted",
          "StepEnded",
          "EntriesReferenced",
          "CueRehydrated",
          "CuePromoted",
          "StepRecalled",
          "CuesDropped",
        ]
        const mood = (json.recalled as { moodSnapshot?: unknown } | undefined)?.moodSnapshot ?? json.moodSnapshot
        fc.pre(common.includes(json._tag as string) && mood == null)
        const reference = schemaDecode(json)
        fc.pre(Exit.isSuccess(reference))
        expect(decodeCommonShape(json)).toEqual(Exit.isSuccess(reference) ? reference.value : undefined)
      }),
      { numRuns: 300 },
    )
  })

  it("reports a version too large to be an exact integer instead of throwing", () => {
    const decoded = decodeEventJson({ _tag: "BudgetChanged", v: 2 ** 53, eventId: "e", agentId: "a", at: 0 })
    expect(decoded.ok).toBe(false)
    expect(decoded.ok ? "" : decoded.reason).toMatch(/^v: unsupported schema version/)
  })
})
