/**
 * The published JSON Schemas (contracts/json/api.schema.json) and the server
 * agree on which requests are valid: a standard validator (ajv, draft
 * 2020-12) and the server's own request decoding give the same verdict on a
 * corpus of generated and hand-written requests, and a sample of the corpus
 * sent to a running system over NATS is refused with a ValidationError
 * exactly when the schema refuses it. Refusals that depend on state (unknown
 * agent, no open step) are not validation verdicts and are not compared.
 */
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { connect, type NatsConnection } from "@nats-io/transport-node"
import { Ajv2020, type ValidateFunction } from "ajv/dist/2020.js"
import { Effect, Exit } from "effect"
import fc from "fast-check"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { MAX_CONTENT_BYTES, type OperationName, operations } from "../../contracts/api.ts"
import { isSubjectToken } from "../../contracts/ids.ts"
import { decodeRequest } from "../../services/platform/api/serve.ts"
import { startTestSystem, type TestSystem } from "../support/system.ts"

type Json = Record<string, unknown>
type Case = { readonly operation: OperationName; readonly body: unknown; readonly why: string }

const api = JSON.parse(
  readFileSync(join(import.meta.dirname, "..", "..", "contracts", "json", "api.schema.json"), "utf8"),
) as {
  agentId: Json
  operations: Record<OperationName, { request: Json & { properties?: Json } }>
}
const ajv = new Ajv2020({ allErrors: true, strict: true, strictRequired: false })
const validators = Object.fromEntries(
  Object.entries(api.operations).map(([name, op]) => [name, ajv.compile(op.request)]),
) as Record<OperationName, ValidateFunction>

const names = Object.keys(operations) as OperationName[]
const encoder = new TextEncoder()

/** The JSON a client would send: what both sides see after the wire. */
const wire = (body: unknown): unknown => JSON.parse(JSON.stringify(body) ?? "null")

const schemaAccepts = (operation: OperationName, body: unknown): boolean => validators[operation](wire(body))
const serverAccepts = (operation: OperationName, body: unknown): boolean =>
  Exit.isSuccess(Effect.runSyncExit(decodeRequest(operation, encoder.encode(JSON.stringify(wire(body))))))

/** A request each operation accepts, the start of every mutation. */
const validBase: Record<OperationName, Json> = {
  registerAgent: { role: "main" },
  retuneBudget: { budget: 4_000 },
  enterHyperfocus: {},
  exitHyperfocus: {},
  recordEntry: { origin: "USER", content: "the deploy failed at step 3" },
  recordMany: { entries: [{ origin: "USER", content: "the deploy failed at step 3" }] },
  beginStep: {},
  setFocus: { focus: { task: "ship the release" } },
  referenceEntries: { stepId: "s1", entryIds: ["e1"] },
  endStep: { stepId: "s1" },
  buildContext: {},
  getView: {},
  readEvents: {},
  getRaw: { entryId: "e1" },
  query: { query: "deploy" },
  thread: { correlationId: "c-1" },
  recall: { stepId: "s1" },
  warmUp: {},
}

const ids = fc.oneof(
  fc.stringMatching(/^[A-Za-z0-9_-]{1,64}$/),
  fc.constantFrom("has space", "a.b.c", "star*", "gt>", "", "x".repeat(64), "x".repeat(65), "é"),
)
const texts = fc.oneof(
  fc.string({ maxLength: 12 }),
  fc.string({ unit: "grapheme", maxLength: 6 }),
  fc.constantFrom(
    "   ",
    "\n\t",
    "a",
    "quoted text here",
    "x".repeat(4_000),
    "x".repeat(4_001),
    "custom",
    "main",
    "USER",
    "SYSTEM",
    "priority",
    "timestamp",
    "o200k_base",
    "gpt5",
  ),
)
const numbers = fc.oneof(
  fc.integer({ min: -3, max: 1_000_002 }),
  fc.double({ noNaN: true, noDefaultInfinity: true, min: -2, max: 2 }),
  fc.constantFrom(
    0,
    1,
    15,
    16,
    100,
    101,
    200,
    201,
    1_000,
    1_001,
    30_000,
    30_001,
    1_000_000,
    1_000_001,
    0.05,
    0.04,
    -1,
    -1.5,
    0.5,
    2 ** 53,
    2 ** 53 + 2,
    1e300,
    8_640_000_000_000_000,
    8_640_000_000_000_001,
  ),
)
const scalars = fc.oneof(ids, texts, numbers, fc.boolean(), fc.constant(null))
/** The nested request objects: focus, mood, fade, relevance, filter, with their keys, a wrong value or an extra key. */
const nested = fc.dictionary(
  fc.constantFrom(
    "task",
    "subgoal",
    "query",
    "valence",
    "arousal",
    "alpha",
    "beta",
    "gamma",
    "tau",
    "tauByTaskKind",
    "extra",
    "origin",
    "tags",
    "agentId",
  ),
  fc.oneof(scalars, fc.dictionary(ids, numbers, { maxKeys: 2 }), fc.array(texts, { maxLength: 2 })),
  { maxKeys: 4 },
)
const values = fc.oneof(
  { weight: 4, arbitrary: scalars },
  { weight: 2, arbitrary: nested },
  { weight: 1, arbitrary: fc.array(fc.oneof(ids, texts), { maxLength: 4 }) },
  { weight: 1, arbitrary: fc.array(ids, { minLength: 17, maxLength: 40 }) },
)

const keysOf = (operation: OperationName): string[] => [
  ...Object.keys(api.operations[operation].request.properties ?? {}),
  "extra",
  "RequestId",
]

/** A valid request with up to three fields set to other values or removed, or a body that is no object at all. */
const mutatedRequest = (operation: OperationName): fc.Arbitrary<Case> =>
  fc.oneof(
    {
      weight: 12,
      arbitrary: fc
        .array(fc.tuple(fc.constantFrom(...keysOf(operation)), fc.option(values, { freq: 6 })), { maxLength: 3 })
        .map((changes) => {
          const body: Json = { ...validBase[operation] }
          for (const [key, value] of changes) {
            if (value === null) delete body[key]
            else body[key] = value
          }
          return { operation, body, why: "generated" }
        }),
    },
    {
      weight: 1,
      arbitrary: fc
        .oneof(scalars, fc.array(scalars, { maxLength: 2 }))
        .map((body) => ({ operation, body, why: "not an object" })),
    },
  )

const generatedCases = fc.constantFrom(...names).chain(mutatedRequest)

const ascii = (bytes: number) => "a".repeat(bytes)

/** The cases a Go client found disagreeing, and the edges of every rule the schema now carries. */
const handWritten: Case[] = [
  { operation: "setFocus", body: { focus: { task: "t", extra: 1 } }, why: "extra property in focus" },
  { operation: "beginStep", body: { focus: { query: "q", Task: "t" } }, why: "misspelt property in focus" },
  {
    operation: "recordEntry",
    body: { origin: "USER", content: "hi", mood: { valence: 0, arousal: 0, extra: true } },
    why: "extra property in mood",
  },
  { operation: "registerAgent", body: { role: "main", fade: { tau: 0.5, taus: 0.4 } }, why: "extra property in fade" },
  {
    operation: "registerAgent",
    body: { role: "main", relevance: { alpha: 1, beta: 0, gamma: 0, delta: 0 } },
    why: "extra property in relevance",
  },
  {
    operation: "registerAgent",
    body: { role: "main", relevance: { alpha: 1, beta: 0, gamma: 0 } },
    why: "relevance weights",
  },
  { operation: "registerAgent", body: { requestId: "has space", role: "main" }, why: "request id with a space" },
  { operation: "registerAgent", body: { requestId: "a.b.c", role: "main" }, why: "request id with dots" },
  { operation: "registerAgent", body: { requestId: "x".repeat(65), role: "main" }, why: "request id of 65 characters" },
  { operation: "registerAgent", body: { requestId: "x".repeat(64), role: "main" }, why: "request id of 64 characters" },
  { operation: "beginStep", body: { stepId: "has space" }, why: "step id with a space" },
  { operation: "beginStep", body: { stepId: "a.b.c" }, why: "step id with dots" },
  { operation: "endStep", body: { stepId: "step_1-A" }, why: "step id" },
  { operation: "referenceEntries", body: { stepId: "s1", entryIds: ["a.b.c"] }, why: "entry id with dots" },
  { operation: "getRaw", body: { entryId: "has space" }, why: "entry id with a space" },
  { operation: "getRaw", body: { entryId: ">" }, why: "entry id that is a wildcard" },
  { operation: "referenceEntries", body: { stepId: "s1" }, why: "a reference naming no entry" },
  {
    operation: "referenceEntries",
    body: { stepId: "s1", entryIds: [], quotes: [] },
    why: "a reference naming no entry, with empty lists",
  },
  {
    operation: "referenceEntries",
    body: { stepId: "s1", entryIds: [], quotes: ["the deploy failed"] },
    why: "a reference by quote only",
  },
  {
    operation: "recordEntry",
    body: { origin: "USER", content: ascii(MAX_CONTENT_BYTES) },
    why: "content at the limit",
  },
  {
    operation: "recordEntry",
    body: { origin: "USER", content: ascii(MAX_CONTENT_BYTES + 1) },
    why: "content one byte over the limit",
  },
  {
    operation: "recordEntry",
    body: { origin: "USER", content: "é".repeat(MAX_CONTENT_BYTES / 2) },
    why: "two-byte content at the limit",
  },
  { operation: "recordEntry", body: { origin: "USER", content: "   \n\t" }, why: "whitespace-only content" },
  {
    operation: "recordEntry",
    body: { origin: "USER", content: "\u00a0\u2003" },
    why: "content of Unicode spaces only",
  },
  { operation: "recordEntry", body: { origin: "USER", content: " a " }, why: "content with visible text" },
  { operation: "recordMany", body: { entries: [] }, why: "an empty batch" },
  {
    operation: "recordMany",
    body: { entries: [{ origin: "USER", content: "hi" }, "not an entry"] },
    why: "a batch whose items are checked one by one, in their results",
  },
  {
    operation: "recordMany",
    body: { requestId: "batch-1", entries: [{ origin: "USER", content: "hi" }] },
    why: "a batch has no request id of its own: each entry has one",
  },
  { operation: "registerAgent", body: { role: "custom" }, why: "custom role without a budget" },
  { operation: "registerAgent", body: { role: "custom", budget: 500 }, why: "custom role with a budget" },
  { operation: "registerAgent", body: { role: "time-actor" }, why: "a role with a default budget" },
  {
    operation: "recordEntry",
    body: { origin: "USER", content: "hi", timestamp: 8_640_000_000_000_001 },
    why: "timestamp past the last date",
  },
  { operation: "buildContext", body: { afterSeq: 2 ** 53 + 2 }, why: "a sequence beyond safe integers" },
  { operation: "buildContext", body: { afterSeq: 1e300 }, why: "a huge sequence" },
  { operation: "buildContext", body: { afterSeq: 3.5 }, why: "a fractional sequence" },
  { operation: "query", body: { query: "q", filter: { extra: 1 } }, why: "extra property in a query filter" },
  {
    operation: "recordEntry",
    body: { origin: "USER", content: "hi", tags: ["😀".repeat(64)] },
    why: "a tag of 64 characters outside the BMP",
  },
  {
    operation: "recordEntry",
    body: { origin: "USER", content: "hi", tags: ["😀".repeat(65)] },
    why: "a tag of 65 characters outside the BMP",
  },
  {
    operation: "referenceEntries",
    body: { stepId: "s1", quotes: ["😀".repeat(4)] },
    why: "a quote of 4 characters outside the BMP (8 UTF-16 units)",
  },
  {
    operation: "referenceEntries",
    body: { stepId: "s1", quotes: ["😀".repeat(8)] },
    why: "a quote of 8 characters outside the BMP",
  },
  {
    operation: "setFocus",
    body: { focus: { task: "😀".repeat(4_000) } },
    why: "a task of 4000 characters outside the BMP",
  },
]

/**
 * What JSON Schema cannot say, documented in the schema's descriptions:
 * `maxLength` counts characters, the server's content limit counts UTF-8
 * bytes. Text of multi-byte characters can pass the schema and be refused.
 */
const documentedGaps: Case[] = [
  {
    operation: "recordEntry",
    body: { origin: "USER", content: "é".repeat(MAX_CONTENT_BYTES / 2 + 1) },
    why: "two-byte content one character over 64 KiB",
  },
]

const disagreements = (cases: ReadonlyArray<Case>) =>
  cases
    .map((c) => ({ ...c, schema: schemaAccepts(c.operation, c.body), server: serverAccepts(c.operation, c.body) }))
    .filter((r) => r.schema !== r.server)
    .map((r) => ({
      operation: r.operation,
      why: r.why,
      body: JSON.stringify(r.body).slice(0, 300),
      schema: r.schema,
      server: r.server,
    }))

describe("JSON Schemas and the server's request decoding", () => {
  it("agree on every hand-written edge case", () => {
    expect(disagreements(handWritten)).toEqual([])
  })

  it("agree on generated requests of every operation, valid and invalid", () => {
    fc.assert(
      fc.property(generatedCases, (c) => {
        expect(disagreements([c])).toEqual([])
      }),
      { numRuns: 4_000 },
    )
  })

  it("agree on the agent id of the subject", () => {
    const validAgentId = ajv.compile(api.agentId)
    for (const id of ["has space", "a.b.c", "*", ">", "", "x".repeat(64), "x".repeat(65), "agent_1-A", "é"]) {
      expect([id, validAgentId(id)]).toEqual([id, isSubjectToken(id)])
    }
    fc.assert(
      fc.property(fc.oneof(ids, fc.string({ maxLength: 70 })), (id) => validAgentId(id) === isSubjectToken(id)),
      { numRuns: 2_000 },
    )
  })

  it("generate both verdicts for every operation (the corpus tests something)", () => {
    const sample = fc.sample(generatedCases, { numRuns: 4_000, seed: 7 })
    for (const operation of names) {
      const verdicts = new Set(
        sample.filter((c) => c.operation === operation).map((c) => serverAccepts(c.operation, c.body)),
      )
      expect([operation, [...verdicts].sort()]).toEqual([operation, [false, true]])
    }
  })

  it("differ only where the schema says it cannot express the rule: UTF-8 bytes of content", () => {
    for (const c of documentedGaps) {
      expect({
        why: c.why,
        schema: schemaAccepts(c.operation, c.body),
        server: serverAccepts(c.operation, c.body),
      }).toEqual({
        why: c.why,
        schema: true,
        server: false,
      })
    }
    const content = (api.operations.recordEntry.request.properties as Record<string, { description?: string }>).content
    expect(content?.description).toMatch(/UTF-8 bytes, which JSON Schema cannot express/)
  })
})

describe("JSON Schemas and a running system over NATS", () => {
  let system: TestSystem
  let nc: NatsConnection
  const agentId = "conformer"

  beforeAll(async () => {
    system = await startTestSystem()
    nc = await connect({ servers: system.server.url })
    await system.client.agent(agentId).register({ role: "main" })
  }, 60_000)
  afterAll(async () => {
    await nc?.close()
    await system?.stop()
  })

  /** True when the system refused the request as invalid; any other reply (a value or a refusal from state) is not a validation verdict. */
  const refusedAsInvalid = async (c: Case): Promise<boolean> => {
    const reply = await nc.request(
      `wm.api.${agentId}.${operations[c.operation].subject}`,
      encoder.encode(JSON.stringify(wire(c.body))),
      { timeout: 10_000 },
    )
    const body = reply.json<{ ok: boolean; error?: { _tag: string; message?: unknown } }>()
    if (!body.ok) expect(typeof body.error?.message).toBe("string")
    return !body.ok && body.error?._tag === "ValidationError"
  }

  /**
   * Operations that only write or read state at once: reads with `afterSeq` or `waitMs` would wait for the
   * log, and hyperfocus and quotes have refusals that depend on state and happen to be ValidationErrors.
   */
  const sendable = new Set<OperationName>([
    "registerAgent",
    "retuneBudget",
    "exitHyperfocus",
    "recordEntry",
    "beginStep",
    "setFocus",
    "endStep",
    "getRaw",
    "thread",
    "recall",
  ])
  const nonValidationState = (c: Case) =>
    sendable.has(c.operation) && !(c.body !== null && typeof c.body === "object" && "afterSeq" in c.body)

  it("refuses a sample of the corpus with a ValidationError exactly when the schema refuses it", async () => {
    const generated = fc.sample(generatedCases, { numRuns: 1_500, seed: 11 }).filter(nonValidationState).slice(0, 150)
    const sample = [...handWritten.filter(nonValidationState), ...generated]
    expect(sample.filter((c) => schemaAccepts(c.operation, c.body)).length).toBeGreaterThan(10)
    expect(sample.filter((c) => !schemaAccepts(c.operation, c.body)).length).toBeGreaterThan(10)
    const mismatches: Array<{ operation: string; why: string; body: string; schema: boolean }> = []
    for (const c of sample) {
      const schema = schemaAccepts(c.operation, c.body)
      if ((await refusedAsInvalid(c)) === schema)
        mismatches.push({ operation: c.operation, why: c.why, body: JSON.stringify(c.body).slice(0, 300), schema })
    }
    expect(mismatches).toEqual([])
  }, 120_000)
})
