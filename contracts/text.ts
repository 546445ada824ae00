import { Schema } from "effect"

/** Characters as JSON Schema counts them: Unicode code points (a UTF-16 surrogate pair is one). */
export const characterCount = (text: string): number => {
  let count = 0
  for (const _ of text) count++
  return count
}

/**
 * A string of `min` to `max` characters, counted as JSON Schema's
 * minLength/maxLength count them, so the published schema and the server
 * agree on text outside the Basic Multilingual Plane too (Effect's own
 * length checks count UTF-16 code units).
 */
export const Text = (min: number, max: number) =>
  Schema.String.check(
    Schema.makeFilter(
      (text: string) => {
        const count = characterCount(text)
        return count >= min && count <= max ? undefined : `must be ${min} to ${max} characters, not ${count}`
      },
      { toJsonSchema: () => ({ minLength: min, maxLength: max }) },
    ),
  )
