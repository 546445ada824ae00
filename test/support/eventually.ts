import { inspect } from "node:util"

/** What a probe answers while the awaited state has not come yet. */
type NotYet = undefined | false

/**
 * Polls `probe` every `everyMs` until it answers something other than `undefined` or `false`, and returns
 * that answer. A probe is either a condition (`() => boolean`) or a lookup that returns the value awaited
 * or `undefined`. A probe that throws is polled again. After `timeoutMs` it fails with an Error naming
 * `what` was awaited and the last answer or error the probe gave.
 */
export const eventually = async <A>(
  what: string,
  probe: () => Promise<A | NotYet> | A | NotYet,
  timeoutMs = 30_000,
  everyMs = 100,
): Promise<Exclude<A, NotYet>> => {
  const deadline = Date.now() + timeoutMs
  let last: { readonly answer: unknown } | { readonly error: unknown } | undefined
  while (true) {
    try {
      const answer = await probe()
      if (answer !== undefined && answer !== false) return answer as Exclude<A, NotYet>
      last = { answer }
    } catch (error) {
      last = { error }
    }
    if (Date.now() >= deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${lastSeen(last)}`)
    await new Promise<void>((resolve) => setTimeout(resolve, everyMs))
  }
}

const lastSeen = (last: { readonly answer: unknown } | { readonly error: unknown } | undefined): string => {
  if (last === undefined) return ""
  if ("error" in last)
    return `; the last error: ${last.error instanceof Error ? last.error.message : shown(last.error)}`
  return `; the last answer: ${shown(last.answer)}`
}

const shown = (value: unknown): string => {
  const text = inspect(value, { depth: 4, breakLength: Number.POSITIVE_INFINITY })
  return text.length > 2_000 ? `${text.slice(0, 2_000)}…` : text
}
