/**
 * Requests of one service admitted by agent: a request of an agent with nothing running or waiting runs at
 * once, and the rest share a bounded number of places.
 *
 * The services of a process share one event loop, and a request runs as a chain of short steps between its
 * round trips; each step waits behind every step queued before it. With 64 records of a burst in flight, a
 * bystander's request waited behind all of their steps, at each of its own. Bounding what agents send beyond
 * one at a time keeps that queue short, while an agent working one request at a time (an agent stepping
 * through its loop) never waits. What waits costs nothing, in its agent's queue: a free place goes to the
 * waiting agent with the fewest running, among equals the one admitted least recently, then the one waiting
 * longest, and an agent's requests start in the order they came.
 */
import { Effect } from "effect"

export interface AdmissionShape {
  /** Runs `request` once admitted, holding its turn or place until it ends. */
  readonly admit: <A, E, R>(agentId: string, request: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  /** Requests running, and waiting to be admitted. */
  readonly stats: () => { readonly running: number; readonly waiting: number }
}

/** What a running request holds: the turn of an agent that had nothing running, or one of the shared places. */
type Slot = "own" | "shared"

interface Waiter {
  readonly order: number
  /** Set when admitted, so a wait interrupted after that gives it back. */
  slot: Slot | null
  readonly resume: (slot: Slot) => void
}

interface AgentRequests {
  ownRunning: boolean
  shared: number
  /** When its last request was admitted, in admissions (-1: none since it was last idle). */
  lastAdmitted: number
  readonly waiting: Waiter[]
}

/** Every request admitted at once: no limit. */
export const unlimitedAdmission: AdmissionShape = {
  admit: (_agentId, request) => request,
  stats: () => ({ running: 0, waiting: 0 }),
}

const runningOf = (requests: AgentRequests) => (requests.ownRunning ? 1 : 0) + requests.shared

/** An idle agent's request at once, and `places` shared by the rest (0: no limit). */
export const makeAdmission = (places: number): AdmissionShape => {
  if (places <= 0) return unlimitedAdmission
  const agents = new Map<string, AgentRequests>()
  /** The agents with a request waiting. */
  const queued = new Set<AgentRequests>()
  let running = 0
  let shared = 0
  let waiting = 0
  let order = 0
  let admissions = 0

  const forget = (agentId: string, requests: AgentRequests) => {
    if (runningOf(requests) === 0 && requests.waiting.length === 0) agents.delete(agentId)
  }

  const take = (requests: AgentRequests, slot: Slot) => {
    running++
    if (slot === "own") requests.ownRunning = true
    else {
      shared++
      requests.shared++
    }
    requests.lastAdmitted = admissions++
  }

  const giveBack = (requests: AgentRequests, slot: Slot) => {
    running--
    if (slot === "own") requests.ownRunning = false
    else {
      shared--
      requests.shared--
    }
  }

  const before = (a: AgentRequests, b: AgentRequests) =>
    runningOf(a) !== runningOf(b)
      ? runningOf(a) < runningOf(b)
      : a.lastAdmitted !== b.lastAdmitted
        ? a.lastAdmitted < b.lastAdmitted
        : a.waiting[0]!.order < b.waiting[0]!.order

  const admitHead = (requests: AgentRequests, slot: Slot) => {
    const waiter = requests.waiting.shift()!
    if (requests.waiting.length === 0) queued.delete(requests)
    waiting--
    take(requests, slot)
    waiter.slot = slot
    waiter.resume(slot)
  }

  /** The shared places, fairest first. */
  const admitWaiting = () => {
    while (shared < places && queued.size > 0) {
      let best: AgentRequests | undefined
      for (const requests of queued) if (best === undefined || before(requests, best)) best = requests
      admitHead(best!, "shared")
    }
  }

  const release = (agentId: string, requests: AgentRequests, slot: Slot) =>
    Effect.sync(() => {
      giveBack(requests, slot)
      admitWaiting()
      forget(agentId, requests)
    })

  /** Waits in the agent's queue for its turn or a place. */
  const admitted = (agentId: string, requests: AgentRequests) =>
    Effect.callback<Slot>((resume) => {
      const waiter: Waiter = { order: order++, slot: null, resume: (slot) => resume(Effect.succeed(slot)) }
      requests.waiting.push(waiter)
      queued.add(requests)
      waiting++
      // An interrupted wait leaves the queue, or gives back what it was given a moment before.
      return Effect.sync(() => {
        if (waiter.slot !== null) {
          giveBack(requests, waiter.slot)
          admitWaiting()
        } else {
          const at = requests.waiting.indexOf(waiter)
          if (at >= 0) {
            requests.waiting.splice(at, 1)
            waiting--
            if (requests.waiting.length === 0) queued.delete(requests)
          }
        }
        forget(agentId, requests)
      })
    })

  return {
    admit: (agentId, request) =>
      Effect.uninterruptibleMask((restore) =>
        Effect.suspend(() => {
          let requests = agents.get(agentId)
          if (requests === undefined) {
            requests = { ownRunning: false, shared: 0, lastAdmitted: -1, waiting: [] }
            agents.set(agentId, requests)
          }
          const own = requests
          // Taken at once, without a turn of the scheduler: the turn of an idle agent, else a place nobody waits for.
          const free: Slot | null =
            own.waiting.length > 0
              ? null
              : runningOf(own) === 0
                ? "own"
                : shared < places && waiting === 0
                  ? "shared"
                  : null
          if (free !== null) {
            take(own, free)
            return Effect.ensuring(restore(request), release(agentId, own, free))
          }
          return Effect.flatMap(restore(admitted(agentId, own)), (slot) =>
            Effect.ensuring(restore(request), release(agentId, own, slot)),
          )
        }),
      ),
    stats: () => ({ running, waiting }),
  }
}
