/**
 * JSON Schemas (draft 2020-12) of the API and the events, for clients in
 * other languages. `npm run contracts:json` writes them to contracts/json/;
 * a test keeps the committed files equal to what the schemas say.
 */
import { Schema } from "effect"
import { operations, replyEnvelope } from "./api.ts"
import { MemoryEvent } from "./events.ts"
import { API_ROOT, EVENTS_ROOT } from "./subjects.ts"

type Json = Record<string, unknown>

const document = (schema: Schema.Top, extra: Json = {}): Json => {
  const doc = Schema.toJsonSchemaDocument(schema) as unknown as { schema: Json; definitions: Json }
  const body = JSON.parse(JSON.stringify(doc.schema).replaceAll("#/definitions/", "#/$defs/")) as Json
  const defs = doc.definitions && Object.keys(doc.definitions).length > 0 ? { $defs: doc.definitions } : {}
  return { ...body, ...extra, ...defs }
}

export const apiJsonSchema = (): Json => ({
  $schema: "https://json-schema.org/draft/2020-12/schema",
  $id: "https://working-memory.dev/schemas/api.schema.json",
  title: "working-memory API over NATS request/reply",
  description: `Each operation is served on ${API_ROOT}.<agentId>.<subject>; the reply is { ok: true, value } or { ok: false, error }. Requests reject unknown fields.`,
  operations: Object.fromEntries(
    Object.entries(operations).map(([name, op]) => [
      name,
      {
        subject: `${API_ROOT}.<agentId>.${op.subject}`,
        summary: op.summary,
        request: document(op.request, { additionalProperties: false }),
        reply: document(replyEnvelope(op.response)),
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
