/**
 * Decoding stored events: the one decoder every projection, the audit and
 * the SDK's mirror use.
 *
 * - An older schema version is upcast to the current one (upcasters.ts):
 *   old logs always decode.
 * - A version newer than this code knows is a `FutureEventVersion`: the
 *   record is fine, this replica is too old to read it. Projections stop on
 *   it (see projection.ts) rather than skip it, so replicas of different
 *   ages never silently diverge in a rolling deploy.
 * - Anything else that does not decode (not JSON, an unknown type, a field
 *   of the wrong type, an older version without an upcaster) is reported
 *   with a reason naming the field, never thrown: projections dead-letter
 *   it and go on.
 */
import { Exit, Schema, SchemaIssue } from "effect"
import { EVENT_TAGS, EVENT_VERSIONS, MemoryEvent, type MemoryEventTag } from "./events.ts"
import { decodeCommonShape } from "./fast-decode.ts"
import { sealedKeysOf } from "./sealed.ts"
import { type StoredJson, UPCASTERS } from "./upcasters.ts"

/** A stored event of a schema version newer than this code understands. */
export class FutureEventVersion extends Schema.TaggedError<FutureEventVersion>()("FutureEventVersion", {
  eventType: Schema.String,
  version: Schema.Int,
  /** The newest version of this event type this code reads. */
  understood: Schema.Int,
}) {
  override get message() {
    return `v: schema version ${this.version} of ${this.eventType} is newer than this code reads (up to ${this.understood}); upgrade this replica`
  }
}

export type Decoded =
  | { readonly ok: true; readonly event: MemoryEvent }
  | { readonly ok: false; readonly reason: string; readonly future?: FutureEventVersion }

const decodeMemoryEvent = Schema.decodeUnknownExit(MemoryEvent)
const formatIssue = SchemaIssue.makeFormatterStandardSchemaV1()
const textDecoder = new TextDecoder()
const KNOWN_TAGS = new Set<string>(EVENT_TAGS)

export const describeSchemaError = (error: unknown): string => {
  if (Schema.isSchemaError(error)) {
    return formatIssue(error.issue)
      .issues.map((i) => `${i.path && i.path.length > 0 ? i.path.join(".") : "(event)"}: ${i.message}`)
      .join("; ")
  }
  return String(error)
}

/** The JSON of `event` at the current version of its type, or why it cannot be. */
export const upcast = (
  tag: MemoryEventTag,
  event: StoredJson,
): { readonly ok: true; readonly json: StoredJson } | Exclude<Decoded, { ok: true }> => {
  const current = EVENT_VERSIONS[tag]
  let json = event
  const stored = json.v
  if (typeof stored !== "number" || !Number.isSafeInteger(stored) || stored < 1)
    return { ok: false, reason: `v: unsupported schema version ${JSON.stringify(stored)} of ${tag}` }
  let v: number = stored
  if (v > current) {
    const future = new FutureEventVersion({ eventType: tag, version: v, understood: current })
    return { ok: false, reason: future.message, future }
  }
  while (v < current) {
    const step = UPCASTERS[tag]?.[v]
    if (step === undefined) return { ok: false, reason: `v: no upcaster from schema version ${v} of ${tag}` }
    json = step(json)
    if (json.v !== v + 1)
      return { ok: false, reason: `v: the upcaster from version ${v} of ${tag} gave version ${JSON.stringify(json.v)}` }
    v += 1
  }
  return { ok: true, json }
}

/**
 * Opens the sealed content of a stored event (contracts/sealed.ts) with its key, or says why it cannot
 * (the key is destroyed: the content is forgotten). Without one, an event with sealed content does not decode.
 */
export type Unseal = (
  json: StoredJson,
) => { readonly ok: true; readonly json: StoredJson } | { readonly ok: false; readonly reason: string }

export const decodeEvent = (data: Uint8Array, unseal?: Unseal): Decoded => {
  let json: unknown
  try {
    json = JSON.parse(textDecoder.decode(data))
  } catch (error) {
    return { ok: false, reason: `not JSON: ${error instanceof Error ? error.message : String(error)}` }
  }
  return decodeEventJson(json, unseal)
}

/** Decodes an event already parsed from JSON (e.g. as the working service's `view.events` sends it). */
export const decodeEventJson = (stored: unknown, unseal?: Unseal): Decoded => {
  if (typeof stored !== "object" || stored === null || Array.isArray(stored))
    return { ok: false, reason: "not a JSON object" }
  let json = stored as StoredJson
  if (sealedKeysOf(json).length > 0) {
    if (unseal === undefined) return { ok: false, reason: "sealed content read without its keys" }
    const opened = unseal(json)
    if (!opened.ok) return opened
    json = opened.json
  }
  const tag = (json as StoredJson)._tag
  if (typeof tag !== "string" || !KNOWN_TAGS.has(tag))
    return { ok: false, reason: `_tag: unknown event type ${JSON.stringify(tag)}` }
  const current = upcast(tag as MemoryEventTag, json as StoredJson)
  if (!current.ok) return current
  const common = decodeCommonShape(current.json)
  if (common !== undefined) return { ok: true, event: common }
  const exit = decodeMemoryEvent(current.json)
  if (Exit.isSuccess(exit)) return { ok: true, event: exit.value }
  const failure = exit.cause.reasons.find((r) => r._tag === "Fail")
  return { ok: false, reason: describeSchemaError(failure?._tag === "Fail" ? failure.error : exit.cause) }
}
