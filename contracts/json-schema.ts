/**
 * JSON Schemas (draft 2020-12) of the API and the events, for clients in
 * other languages. `npm run contracts:json` writes them to contracts/json/;
 * a test keeps the committed files equal to what the schemas say.
 */
import { Schema } from "effect"
import { operations, replyEnvelope } from "./api.ts"
import { ApiError } from "./errors.ts"
import { MemoryEvent } from "./events.ts"
import { AgentId } from "./ids.ts"
import { API_ROOT, EVENTS_ROOT } from "./subjects.ts"

type Json = Record<string, unknown>

const document = (schema: Schema.Top, extra: Json = {}, options: Schema.ToJsonSchemaOptions = {}): Json => {
  const doc = Schema.toJsonSchemaDocument(schema, options) as unknown as { schema: Json; definitions: Json }
  const body = JSON.parse(JSON.stringify(doc.schema).replaceAll("#/definitions/", "#/$defs/")) as Json
  const defs = doc.definitions && Object.keys(doc.definitions).length > 0 ? { $defs: doc.definitions } : {}
  return { ...body, ...extra, ...defs }
}

/** Requests reject unknown fields at every depth, as the server's decoder does. */
const requestDocument = (schema: Schema.Top): Json => document(schema, {}, { onExcessProperty: "error" })

/**
 * What Effect's JSON Schema compiler cannot carry from the requests' custom
 * checks (api.ts): the custom role has no default budget, so a registration
 * with it must give one; a reference names at least one entry.
 */
const requestRules: Readonly<Record<string, Json>> = {
  registerAgent: {
    if: { properties: { role: { const: "custom" } }, required: ["role"] },
    // biome-ignore lint/suspicious/noThenProperty: JSON Schema's if/then keyword, not a thenable.
    then: { required: ["budget"] },
  },
  referenceEntries: {
    anyOf: [
      { required: ["entryIds"], properties: { entryIds: { type: "array", minItems: 1 } } },
      { required: ["quotes"], properties: { quotes: { type: "array", minItems: 1 } } },
    ],
  },
}
const withRequestRules = (name: string, request: Json): Json => ({ ...request, ...requestRules[name] })

const ERROR_TAGS: ReadonlySet<string> = new Set(ApiError.members.map((member) => member.identifier))

/** Every error on the wire carries `message`, a human-readable sentence the server adds (serve.ts encodeError). */
const withErrorMessages = (reply: Json): Json => {
  const defs = reply.$defs as Record<string, Json> | undefined
  if (defs === undefined) return reply
  const withMessage = Object.fromEntries(
    Object.entries(defs).map(([name, def]) => {
      const tag = (def.properties as Record<string, Json> | undefined)?._tag
      const isError = tag !== undefined && Array.isArray(tag.enum) && ERROR_TAGS.has(String(tag.enum[0]))
      if (!isError) return [name, def]
      return [
        name,
        {
          ...def,
          properties: {
            ...(def.properties as Json),
            message: { type: "string", description: "a human-readable sentence saying what went wrong" },
          },
          required: [...((def.required as string[] | undefined) ?? []), "message"],
        },
      ]
    }),
  )
  return { ...reply, $defs: withMessage }
}

export const apiJsonSchema = (): Json => ({
  $schema: "https://json-schema.org/draft/2020-12/schema",
  $id: "https://working-memory.dev/schemas/api.schema.json",
  title: "working-memory API over NATS request/reply",
  description: `Each operation is served on ${API_ROOT}.<agentId>.<subject>; the reply is { ok: true, value } or { ok: false, error }. Requests reject unknown fields.`,
  /** The `<agentId>` token of every operation's subject. */
  agentId: document(AgentId),
  operations: Object.fromEntries(
    Object.entries(operations).map(([name, op]) => [
      name,
      {
        subject: `${API_ROOT}.<agentId>.${op.subject}`,
        summary: op.summary,
        request: withRequestRules(name, requestDocument(op.request)),
        reply: withErrorMessages(document(replyEnvelope(op.response))),
      },
    ]),
  ),
})

export const eventsJsonSchema = (): Json => ({
  $schema: "https://json-schema.org/draft/2020-12/schema",
  $id: "https://working-memory.dev/schemas/events.schema.json",
  title: "working-memory events",
  description: `Events stored on the WM_EVENTS stream under ${EVENTS_ROOT}.>; discriminated by _tag, versioned by v.`,
  ...document(MemoryEvent),
})
