/**
 * Decoding stored events. A record that is not JSON, carries an unknown
 * schema version, or does not match its event's schema is reported with a
 * reason naming the field, never thrown: projections dead-letter it and go on.
 */
import { Exit, Schema, SchemaIssue } from "effect"
import { EVENT_TAGS, MemoryEvent } from "../../contracts/events.ts"

export type Decoded = { readonly ok: true; readonly event: MemoryEvent } | { readonly ok: false; readonly reason: string }

const decodeMemoryEvent = Schema.decodeUnknownExit(MemoryEvent)
const formatIssue = SchemaIssue.makeFormatterStandardSchemaV1()
const textDecoder = new TextDecoder()
const KNOWN_TAGS = new Set<string>(EVENT_TAGS)
const SUPPORTED_VERSIONS = new Set([1])

export const describeSchemaError = (error: unknown): string => {
  if (Schema.isSchemaError(error)) {
    return formatIssue(error.issue)
      .issues.map((i) => `${i.path && i.path.length > 0 ? i.path.join(".") : "(event)"}: ${i.message}`)
      .join("; ")
  }
  return String(error)
}

export const decodeEvent = (data: Uint8Array): Decoded => {
  let json: unknown
  try {
    json = JSON.parse(textDecoder.decode(data))
  } catch (error) {
    return { ok: false, reason: `not JSON: ${error instanceof Error ? error.message : String(error)}` }
  }
  if (typeof json !== "object" || json === null) return { ok: false, reason: "not a JSON object" }
  const { _tag: tag, v } = json as { _tag?: unknown; v?: unknown }
  if (typeof tag !== "string" || !KNOWN_TAGS.has(tag)) return { ok: false, reason: `_tag: unknown event type ${JSON.stringify(tag)}` }
  if (typeof v !== "number" || !SUPPORTED_VERSIONS.has(v)) {
    return { ok: false, reason: `v: unsupported schema version ${JSON.stringify(v)} of ${tag}` }
  }
  const exit = decodeMemoryEvent(json)
  if (Exit.isSuccess(exit)) return { ok: true, event: exit.value }
  const failure = exit.cause.reasons.find((r) => r._tag === "Fail")
  return { ok: false, reason: describeSchemaError(failure?._tag === "Fail" ? failure.error : exit.cause) }
}
