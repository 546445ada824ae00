/**
 * Requests first. The services of one process share its event loop, so an agent's request would otherwise
 * wait behind whatever background work (fading's key points, summaries and embeddings) happens to be queued
 * on it. Requests are counted while they run; background work asks for a turn before each unit of CPU-heavy
 * work, and turns are given one at a time, each on a turn of the event loop of its own, so what arrived on
 * the sockets meanwhile is read first. A turn is due when the loop comes round to it; if that took longer
 * than `congestedMs` while requests are in flight, the loop is busy with them, and the turn waits `paceMs`
 * more: background work slows down under a load of requests but never stops, and what it leaves behind is
 * what back-pressure (`Overloaded`) measures. Requests in flight that only wait (on the log, on a peer) do
 * not hold background work back.
 *
 * One lane per event loop (a module-level instance: each worker thread has its own).
 */
import { Context, Effect } from "effect"

export interface RequestsFirstOptions {
  /** How long a turn waits, while the loop is busy with requests. */
  readonly paceMs: number
  /** How long the loop may take to come round to a turn before it counts as busy (0: always busy). */
  readonly congestedMs: number
}

export const DEFAULT_REQUESTS_FIRST: RequestsFirstOptions = { paceMs: 10, congestedMs: 5 }

export interface RequestsFirstShape {
  /** Runs `request`, counted as in flight until it ends. */
  readonly serve: <A, E, R>(request: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  /** Waits for background work's next turn. */
  readonly backgroundTurn: Effect.Effect<void>
  /** Requests in flight, and background units waiting for a turn. */
  readonly stats: () => { readonly inFlight: number; readonly waiting: number }
}

export const makeRequestsFirst = (options: RequestsFirstOptions = DEFAULT_REQUESTS_FIRST): RequestsFirstShape => {
  let inFlight = 0
  const waiting: Array<() => void> = []
  /** A turn is on its way (asked of the loop, or paced). */
  let due = false
  let paced: NodeJS.Timeout | undefined

  const giveNext = () => {
    due = false
    paced = undefined
    waiting.shift()?.()
    schedule()
  }
  const schedule = () => {
    if (due || waiting.length === 0) return
    due = true
    const asked = performance.now()
    setImmediate(() => {
      if (inFlight > 0 && performance.now() - asked >= options.congestedMs) {
        paced = setTimeout(giveNext, options.paceMs)
        paced.unref()
      } else giveNext()
    })
  }

  const ended = Effect.sync(() => {
    inFlight--
    // The last request ended while a turn was paced: it is due now.
    if (inFlight === 0 && paced !== undefined) {
      clearTimeout(paced)
      giveNext()
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
