/**
 * Malformed and hostile requests, generated with fast-check, on every API
 * subject: random JSON, wrong types, unknown fields, huge strings, deep
 * nesting, unicode, invalid agent ids in the subject, bytes that are not
 * JSON. Every reply is a typed error (ValidationError naming a field), the
 * services keep answering, and the log does not move. Payloads above the
 * content limit and above the NATS max payload get clear errors.
 */
import { createConnection } from "node:net"
import { connect, type NatsConnection } from "@nats-io/transport-node"
import { Exit, Schema } from "effect"
import fc from "fast-check"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { MAX_CONTENT_BYTES, type OperationName, operations } from "../../contracts/api.ts"
import { ApiError, ValidationError } from "../../contracts/errors.ts"
import { apiSubject } from "../../contracts/subjects.ts"
import { type NatsServerProcess, startNatsServer } from "../../infra/nats-server.ts"
import { WorkingMemoryClient } from "../../sdk/client.ts"
import { systemLayer } from "../../services/system.ts"
import { streamLastSeq, teardown } from "./support/audit.ts"
import { recordFigures } from "./support/figures.ts"
import { type InProcess, settingsFor, startInProcess } from "./support/services.ts"

const AGENT = "hostile-target"

let server: NatsServerProcess
let services: InProcess<unknown>
let client: WorkingMemoryClient
let nc: NatsConnection

beforeAll(async () => {
  server = await startNatsServer()
  // No fade worker: nothing but the requests below may write.
  services = await startInProcess(systemLayer(settingsFor(server.url), { fade: false }))
  client = await WorkingMemoryClient.connect({ servers: server.url })
  nc = await connect({ servers: server.url, maxReconnectAttempts: -1 })
  const agent = client.agent(AGENT)
  await agent.register({ role: "main" })
  await agent.record({ origin: "USER", content: "an accepted entry" })
  await agent.beginStep({ stepId: "open-step" })
})
afterAll(() =>
  teardown(
    () => nc?.close(),
    () => client?.close(),
    () => services?.stop(),
    () => server?.stop(),
  ),
)

const names = Object.keys(operations) as OperationName[]
const decodeApiError = Schema.decodeUnknownExit(ApiError)
const textDecoder = new TextDecoder()
const textEncoder = new TextEncoder()

/** The request schema accepts this body as is: not a malformed request, so not sent. */
const isWellFormed = (name: OperationName, body: unknown): boolean =>
  Exit.isSuccess(
    Schema.decodeUnknownExit(operations[name].request as unknown as Schema.Codec<unknown, unknown>)(body, {
      onExcessProperty: "error",
    }),
  )

const fieldsOf = (name: OperationName): string[] =>
  Object.keys((operations[name].request as unknown as { fields: object }).fields)

interface Reply {
  readonly ok: boolean
  readonly error?: Record<string, unknown>
}

interface Tally {
  sent: number
  validationErrors: number
  otherTypedErrors: Record<string, number>
  maxReplyBytes: number
}
const tallies = new Map<string, Tally>()
const tallyOf = (name: string) => {
  let t = tallies.get(name)
  if (t === undefined) {
    t = { sent: 0, validationErrors: 0, otherTypedErrors: {}, maxReplyBytes: 0 }
    tallies.set(name, t)
  }
  return t
}

/** Sends raw bytes on a subject and checks the reply is a typed error; returns it. */
const refused = async (
  name: string,
  subject: string,
  body: Uint8Array | string,
  expectField?: string,
): Promise<Record<string, unknown>> => {
  const tally = tallyOf(name)
  tally.sent++
  const msg = await nc.request(subject, body, { timeout: 10_000 })
  tally.maxReplyBytes = Math.max(tally.maxReplyBytes, msg.data.length)
  const reply = JSON.parse(textDecoder.decode(msg.data)) as Reply
  if (reply.ok !== false || reply.error === undefined)
    throw new Error(`${subject} accepted ${String(body).slice(0, 200)}`)
  const decoded = decodeApiError(reply.error)
  if (!Exit.isSuccess(decoded))
    throw new Error(`${subject}: not a typed error: ${JSON.stringify(reply.error).slice(0, 300)}`)
  const error = reply.error
  if (error._tag !== "ValidationError") {
    tally.otherTypedErrors[String(error._tag)] = (tally.otherTypedErrors[String(error._tag)] ?? 0) + 1
    throw new Error(`${subject}: expected a ValidationError, got ${JSON.stringify(error).slice(0, 300)}`)
  }
  tally.validationErrors++
  if (typeof error.field !== "string" || error.field.length === 0)
    throw new Error(`${subject}: ValidationError without a field`)
  if (typeof error.message !== "string") throw new Error(`${subject}: ValidationError without a message`)
  if (expectField !== undefined && error.field !== expectField)
    throw new Error(`${subject}: field ${String(error.field)}, expected ${expectField}`)
  return error
}

const stillServing = async () => {
  const view = await client.agent(AGENT).view()
  expect(view.agent.id).toBe(AGENT)
}

const jsonBody = (value: unknown) => textEncoder.encode(JSON.stringify(value))

const isNotJson = (bytes: Uint8Array) => {
  const text = textDecoder.decode(bytes).trim()
  if (text.length === 0) return false
  try {
    JSON.parse(text)
    return false
  } catch {
    return true
  }
}

const SAFE_SUBJECT_CHARS = [
  ..."abcXYZ019_-",
  "$",
  "%",
  "#",
  "~",
  "!",
  "@",
  "+",
  "=",
  ",",
  "é",
  "ü",
  "ß",
  "🙂",
  "中",
  "\u0301",
]
const badAgentId = fc
  .string({ unit: fc.constantFrom(...SAFE_SUBJECT_CHARS), minLength: 1, maxLength: 90 })
  .filter((id) => !/^[A-Za-z0-9_-]{1,64}$/.test(id))

const anyValue = fc.oneof(
  fc.integer(),
  fc.double(),
  fc.boolean(),
  fc.constant(null),
  fc.string(),
  fc.string({ unit: "binary", maxLength: 40 }),
  fc.array(fc.jsonValue({ maxDepth: 2 }), { maxLength: 4 }),
  fc.dictionary(fc.string({ maxLength: 8 }), fc.jsonValue({ maxDepth: 1 }), { maxKeys: 3 }),
)

const nested = (depth: number, kind: "array" | "object"): string =>
  kind === "array" ? "[".repeat(depth) + "]".repeat(depth) : `${'{"a":'.repeat(depth)}1${"}".repeat(depth)}`

/** Ordinary text of exactly `bytes` UTF-8 bytes. */
const prose = (bytes: number) =>
  "The quick brown fox jumps over the lazy dog. ".repeat(Math.ceil(bytes / 45)).slice(0, bytes)

const RUNS = { json: 25, wrongType: 30, unknownField: 15, nonJson: 15, badAgent: 15, unicode: 15 }

describe("hostile requests on every API subject", () => {
  let lastBefore = 0
  beforeAll(async () => {
    lastBefore = await streamLastSeq(server.url)
  })

  it("every operation of the contract is served here", async () => {
    for (const name of names) {
      const reply = await nc.request(apiSubject(AGENT, operations[name].subject), "[]", { timeout: 10_000 })
      expect((JSON.parse(textDecoder.decode(reply.data)) as Reply).ok, name).toBe(false)
    }
  })

  for (const name of names) {
    it(`${name} (${operations[name].subject}): every malformed request gets a typed error and writes nothing`, async () => {
      const subject = apiSubject(AGENT, operations[name].subject)
      const fields = fieldsOf(name)
      const before = await streamLastSeq(server.url)

      // Random JSON values that the schema refuses.
      await fc.assert(
        fc.asyncProperty(fc.jsonValue({ maxDepth: 4 }), async (value) => {
          fc.pre(!isWellFormed(name, value))
          await refused(name, subject, jsonBody(value))
        }),
        { numRuns: RUNS.json },
      )
      // A known field with a value of the wrong type (or out of range).
      if (fields.length > 0) {
        await fc.assert(
          fc.asyncProperty(fc.constantFrom(...fields), anyValue, async (field, value) => {
            const body = { [field]: value }
            fc.pre(!isWellFormed(name, body))
            await refused(name, subject, jsonBody(body))
          }),
          { numRuns: RUNS.wrongType },
        )
      }
      // Unknown fields are refused, named.
      await fc.assert(
        fc.asyncProperty(
          fc.string({ minLength: 1, maxLength: 30 }).filter((k) => !fields.includes(k) && k !== "__proto__"),
          fc.jsonValue({ maxDepth: 2 }),
          async (key, value) => {
            const error = await refused(name, subject, jsonBody({ [key]: value }))
            expect((error.issues as Array<{ field: string }>).map((i) => i.field)).toContain(key)
          },
        ),
        { numRuns: RUNS.unknownField },
      )
      // Bytes that are not JSON.
      await fc.assert(
        fc.asyncProperty(fc.uint8Array({ minLength: 1, maxLength: 300 }).filter(isNotJson), async (bytes) => {
          await refused(name, subject, bytes, "(body)")
        }),
        { numRuns: RUNS.nonJson },
      )
      // Agent ids that are not ids, whatever the body.
      await fc.assert(
        fc.asyncProperty(badAgentId, fc.jsonValue({ maxDepth: 2 }), async (agentId, value) => {
          await refused(name, apiSubject(agentId, operations[name].subject), jsonBody(value), "agentId")
        }),
        { numRuns: RUNS.badAgent },
      )
      // Unicode everywhere: keys, values, lone surrogates, combining marks.
      await fc.assert(
        fc.asyncProperty(
          fc.constantFrom(...fields, "ключ", "🙂", "\u0000", "a\u0301"),
          fc.string({ unit: "binary", minLength: 1, maxLength: 60 }),
          async (key, value) => {
            const body = { [key]: value }
            fc.pre(!isWellFormed(name, body))
            await refused(name, subject, jsonBody(body))
          },
        ),
        { numRuns: RUNS.unicode },
      )
      // Huge strings in each field, and deep nesting, up to most of the max payload.
      for (const field of [...fields, "unexpected"]) {
        const body = { [field]: "x".repeat(600_000) }
        if (!isWellFormed(name, body)) await refused(name, subject, jsonBody(body))
      }
      for (const depth of [1_000, 100_000]) {
        await refused(name, subject, nested(depth, "array"))
        await refused(name, subject, `{"${fields[0] ?? "x"}":${nested(depth, "object")}}`)
      }

      expect(await streamLastSeq(server.url), "no refused request wrote anything").toBe(before)
      await stillServing()
    })
  }

  it("oversized content is refused with the limit; a payload above the NATS max payload gets a clear error", async () => {
    const agent = client.agent(AGENT)
    const before = await streamLastSeq(server.url)
    const maxPayload = nc.info?.max_payload ?? 0
    expect(maxPayload).toBe(1024 * 1024)

    // Above the content limit, below the max payload: the gateway refuses it, naming the limit.
    const tooLong = await agent
      .record({ origin: "USER", content: "é".repeat(MAX_CONTENT_BYTES / 2 + 1) })
      .catch((e: unknown) => e)
    expect(tooLong).toBeInstanceOf(ValidationError)
    expect((tooLong as ValidationError).field).toBe("content")
    expect((tooLong as ValidationError).reason).toBe(
      `is ${MAX_CONTENT_BYTES + 2} bytes; the limit is ${MAX_CONTENT_BYTES} bytes`,
    )
    // Exactly at the limit it is accepted.
    const atLimit = await agent.record({ requestId: "at-the-limit", origin: "USER", content: prose(MAX_CONTENT_BYTES) })
    expect(atLimit.entryId).toBe("at-the-limit")

    // Above the max payload, through the SDK: refused before sending, saying which limit.
    const huge = await agent.record({ origin: "USER", content: "z".repeat(2 * maxPayload) }).catch((e: unknown) => e)
    expect(huge).toBeInstanceOf(ValidationError)
    expect((huge as ValidationError).field).toBe("(body)")
    expect((huge as ValidationError).reason).toMatch(
      new RegExp(`above the server's max_payload of ${maxPayload} bytes`),
    )

    // Above the max payload from a client that does not check: the server closes that connection
    // with "Maximum Payload Violation"; nobody else notices.
    const serverSays = await new Promise<string>((resolve, reject) => {
      const socket = createConnection({ host: "127.0.0.1", port: server.port })
      let said = ""
      socket.on("data", (chunk) => {
        said += chunk.toString()
        if (said.includes("INFO ") && !socket.writableEnded && socket.bytesWritten === 0) {
          // The announced size alone is refused: the payload never needs to follow.
          socket.write(
            `CONNECT {"verbose":false,"pedantic":false}\r\nPUB ${apiSubject(AGENT, "entry.record")} ${2 * maxPayload}\r\n`,
          )
        }
      })
      socket.on("close", () => resolve(said))
      socket.on("error", () => resolve(said))
      setTimeout(() => reject(new Error(`no answer: ${said}`)), 10_000)
    })
    expect(serverSays).toMatch(/-ERR 'Maximum Payload Violation'/)

    // A reply too large for the max payload: a view of an agent holding more raw text than 1 MB.
    const big = client.agent("hostile-big")
    await big.register({ role: "custom", budget: 1_000_000 })
    for (let i = 0; i < 20; i++) await big.record({ origin: "USER", content: `${i} ${prose(MAX_CONTENT_BYTES - 10)}` })
    const tooBig = await big.view().catch((e: unknown) => e)
    expect(tooBig, "an oversized reply is a typed error, not a timeout").toBeInstanceOf(Error)
    expect((tooBig as { _tag?: string })._tag).toBe("InvalidState")
    expect(String((tooBig as { reason?: string }).reason)).toMatch(new RegExp(`max_payload of ${maxPayload} bytes`))

    await stillServing()
    expect(await streamLastSeq(server.url)).toBe(before + 1 + 1 + 20)

    recordFigures("hostile-requests", {
      operations: names.length,
      runsPerOperation: RUNS,
      requests: Object.fromEntries([...tallies].map(([k, t]) => [k, t])),
      totalSent: [...tallies.values()].reduce((n, t) => n + t.sent, 0),
      totalTypedErrors: [...tallies.values()].reduce((n, t) => n + t.validationErrors, 0),
      logMovedByRefusals: 0,
      logLastSeqBefore: lastBefore,
      contentLimitBytes: MAX_CONTENT_BYTES,
      natsMaxPayloadBytes: maxPayload,
      contentAboveLimit: (tooLong as ValidationError).message,
      sdkAboveMaxPayload: (huge as ValidationError).message,
      rawClientAboveMaxPayload: serverSays.match(/-ERR '[^']+'/)?.[0] ?? serverSays,
      replyAboveMaxPayload: String((tooBig as { message?: string }).message),
    })
  })
})
