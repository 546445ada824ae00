/**
 * Requests of one service run a bounded number at a time, the agent with the fewest running first.
 *
 * The services of a process share one event loop, and a request runs as a chain of short steps between its
 * round trips; each step waits behind every step queued before it. With 64 records of a burst in flight, a
 * bystander's request waited behind all of their steps, at each of its own. Admitting fewer at once keeps
 * that queue short; the rest wait without costing anything, and are admitted by agent: the next one goes to
 * the agent with the fewest requests running, and among equals to the one admitted least recently (then the
 * one waiting longest), so an agent sending one request at a time is not queued behind another's burst.
 */
import { Effect } from "effect"

export interface AdmissionShape {
  /** Runs `request` once admitted (at once while fewer than the limit run), holding its place until it ends. */
  readonly admit: <A, E, R>(agentId: string, request: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  /** Requests running, and waiting to be admitted. */
  readonly stats: () => { readonly running: number; readonly waiting: number }
}

interface Waiter {
  readonly order: number
  /** Set when admitted, so a wait interrupted after that gives the place back. */
  admitted: boolean
  readonly resume: () => void
}

interface AgentRequests {
  running: number
  /** When its last request was admitted, in admissions (-1: none since it was last idle). */
  lastAdmitted: number
  readonly waiting: Waiter[]
}

/** Every request admitted at once: no limit. */
export const unlimitedAdmission: AdmissionShape = {
  admit: (_agentId, request) => request,
  stats: () => ({ running: 0, waiting: 0 }),
}

/** At most `limit` requests running at once (0: no limit). */
export const makeAdmission = (limit: number): AdmissionShape => {
  if (limit <= 0) return unlimitedAdmission
  const agents = new Map<string, AgentRequests>()
  /** The agents with a request waiting. */
  const queued = new Set<AgentRequests>()
  let running = 0
  let waiting = 0
  let order = 0
  let admissions = 0

  const forget = (agentId: string, requests: AgentRequests) => {
    if (requests.running === 0 && requests.waiting.length === 0) agents.delete(agentId)
  }

  const before = (a: AgentRequests, b: AgentRequests) =>
    a.running !== b.running
      ? a.running < b.running
      : a.lastAdmitted !== b.lastAdmitted
        ? a.lastAdmitted < b.lastAdmitted
        : a.waiting[0]!.order < b.waiting[0]!.order

  /** The waiting agent to admit next (see above). */
  const nextAgent = (): AgentRequests | undefined => {
    let best: AgentRequests | undefined
    for (const requests of queued) if (best === undefined || before(requests, best)) best = requests
    return best
  }

  const admitWaiting = () => {
    while (running < limit) {
      const requests = nextAgent()
      if (requests === undefined) return
      const waiter = requests.waiting.shift()!
      if (requests.waiting.length === 0) queued.delete(requests)
      waiting--
      take(requests)
      waiter.admitted = true
      waiter.resume()
    }
  }

  const release = (agentId: string, requests: AgentRequests) =>
    Effect.sync(() => {
      running--
      requests.running--
      forget(agentId, requests)
      admitWaiting()
    })

  /** Takes a place for the agent's request. */
  const take = (requests: AgentRequests) => {
    running++
    requests.running++
    requests.lastAdmitted = admissions++
  }

  /** Waits in the agent's queue for a place. */
  const place = (agentId: string, requests: AgentRequests) =>
    Effect.callback<void>((resume) => {
      const waiter: Waiter = { order: order++, admitted: false, resume: () => resume(Effect.void) }
      requests.waiting.push(waiter)
      queued.add(requests)
      waiting++
      // An interrupted wait leaves the queue, or gives back the place it was given a moment before.
      return Effect.sync(() => {
        if (waiter.admitted) {
          running--
          requests.running--
          forget(agentId, requests)
          admitWaiting()
          return
        }
        const at = requests.waiting.indexOf(waiter)
        if (at >= 0) {
          requests.waiting.splice(at, 1)
          waiting--
          if (requests.waiting.length === 0) queued.delete(requests)
          forget(agentId, requests)
        }
      })
    })

  return {
    admit: (agentId, request) =>
      Effect.uninterruptibleMask((restore) =>
        Effect.suspend(() => {
          let requests = agents.get(agentId)
          if (requests === undefined) {
            requests = { running: 0, lastAdmitted: -1, waiting: [] }
            agents.set(agentId, requests)
          }
          // A free place nobody waits for is taken at once, without a turn of the scheduler.
          if (running < limit && waiting === 0) {
            take(requests)
            return Effect.ensuring(restore(request), release(agentId, requests))
          }
          const own = requests
          return Effect.andThen(restore(place(agentId, own)), Effect.ensuring(restore(request), release(agentId, own)))
        }),
      ),
    stats: () => ({ running, waiting }),
  }
}
