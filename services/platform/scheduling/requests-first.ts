/**
 * Requests first. The services of one process share its event loop, so an agent's request would otherwise
 * wait behind whatever background work (fading's key points, summaries and embeddings) happens to be queued
 * on it. Requests are counted while they run; background work asks for a turn before each unit of CPU-heavy
 * work, and turns are given one at a time, each on a turn of the event loop of its own, so what arrived on
 * the sockets meanwhile is read first. A turn is due when the loop comes round to it. If that took
 * `congestedMs` or more while requests are in flight, the loop is busy with them, and background work keeps
 * to `busyShare` of the time: after a unit that ran d ms, the next turn waits d × (1 − share) / share. So it
 * slows down under a load of requests but never stops, and what it leaves behind is what back-pressure
 * (`Overloaded`) measures; short units (a plan that finds nothing to move) are hardly held back.
 *
 * One lane per event loop (a module-level instance: each worker thread has its own).
 */
import { Context, Effect } from "effect"

export interface RequestsFirstOptions {
  /** The share of the time background work keeps while the loop is busy with requests. */
  readonly busyShare: number
  /** How long the loop may take to come round to a turn before it counts as busy (0: always, with a request in flight). */
  readonly congestedMs: number
  /** The least a turn waits while the loop is busy. */
  readonly minHoldMs: number
}

export const DEFAULT_REQUESTS_FIRST: RequestsFirstOptions = { busyShare: 0.25, congestedMs: 5, minHoldMs: 0 }

export interface RequestsFirstShape {
  /** Runs `request`, counted as in flight until it ends. */
  readonly serve: <A, E, R>(request: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  /** Waits for background work's next turn. */
  readonly backgroundTurn: Effect.Effect<void>
  /** Requests in flight, and background units waiting for a turn. */
  readonly stats: () => { readonly inFlight: number; readonly waiting: number }
}

export const makeRequestsFirst = (options: RequestsFirstOptions = DEFAULT_REQUESTS_FIRST): RequestsFirstShape => {
  const holdPerMs = (1 - options.busyShare) / options.busyShare
  let inFlight = 0
  const waiting: Array<() => void> = []
  /** A turn is on its way (asked of the loop, or held back). */
  let due = false
  let held: NodeJS.Timeout | undefined
  /** How long the last unit ran: a resumed fiber runs its unit at once, until its next wait. */
  let lastUnitMs = 0

  const giveNext = () => {
    due = false
    held = undefined
    const give = waiting.shift()
    if (give !== undefined) {
      const started = performance.now()
      give()
      lastUnitMs = performance.now() - started
    }
    schedule()
  }
  const schedule = () => {
    if (due || waiting.length === 0) return
    due = true
    const asked = performance.now()
    setImmediate(() => {
      const busy = inFlight > 0 && performance.now() - asked >= options.congestedMs
      const holdMs = busy ? Math.max(options.minHoldMs, lastUnitMs * holdPerMs) : 0
      if (holdMs >= 1) {
        held = setTimeout(giveNext, holdMs)
        held.unref()
      } else giveNext()
    })
  }

  const ended = Effect.sync(() => {
    inFlight--
    // The last request ended while a turn was held back: it is due on the next turn of the loop, not in
    // this request's own finalizer (its reply is not sent yet).
    if (inFlight === 0 && held !== undefined) {
      clearTimeout(held)
      held = undefined
      setImmediate(giveNext)
    }
  })

  return {
    serve: (request) =>
      Effect.suspend(() => {
        inFlight++
        return Effect.ensuring(request, ended)
      }),
    backgroundTurn: Effect.callback<void>((resume) => {
      let given = false
      const give = () => {
        given = true
        resume(Effect.void)
      }
      waiting.push(give)
      schedule()
      // An interrupted wait gives its turn up.
      return Effect.sync(() => {
        if (given) return
        const at = waiting.indexOf(give)
        if (at >= 0) waiting.splice(at, 1)
      })
    }),
    stats: () => ({ inFlight, waiting: waiting.length }),
  }
}

const processLane = makeRequestsFirst()

/** This event loop's lane (see above); a test may provide one of its own. */
export const RequestsFirst = Context.Reference<RequestsFirstShape>("wm/RequestsFirst", {
  defaultValue: () => processLane,
})
