/**
 * Readers of the JSON a snapshot carries, for the decoders of views and of services' kept state: each
 * returns the value with its type or throws naming the field, and the snapshot is then ignored.
 */
export interface FieldReaders {
  readonly fail: (field: string, reason: string) => never
  readonly array: (value: unknown, field: string) => unknown[]
  readonly string: (value: unknown, field: string) => string
  readonly number: (value: unknown, field: string) => number
  readonly object: (value: unknown, field: string) => Record<string, unknown>
}

/** Readers whose errors say `message(field, reason)`. */
export const fieldReaders = (message: (field: string, reason: string) => string): FieldReaders => {
  const fail = (field: string, reason: string): never => {
    throw new Error(message(field, reason))
  }
  return {
    fail,
    array: (value, field) => (Array.isArray(value) ? value : fail(field, "not an array")),
    string: (value, field) => (typeof value === "string" ? value : fail(field, "not a string")),
    number: (value, field) =>
      typeof value === "number" && Number.isFinite(value) ? value : fail(field, "not a number"),
    object: (value, field) =>
      value !== null && typeof value === "object" && !Array.isArray(value)
        ? (value as Record<string, unknown>)
        : fail(field, "not an object"),
  }
}
