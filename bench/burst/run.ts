/**
 * A burst larger than the background work can absorb, against every service in one process as
 * `npm start` runs them: `agents` agents record `turns` long turns (LongMemEval's assistant turns, or
 * generated ones of the same size) with `inFlight` requests outstanding; `laterAfterSeconds` after the
 * burst began, while the services still work off what it left, `later` more records are sent, each
 * timed to its first answer (accepted, or a typed `Overloaded` saying how long to wait, which is then
 * honoured as the SDKs do); all the while a bystander agent builds its context every 200 ms. At the end
 * the log is read: every acknowledged record must be in it exactly once.
 */
import type { NatsConnection } from "@nats-io/transport-node"
import { scanLog } from "../../cli/audit/log.ts"
import { Overloaded } from "../../contracts/errors.ts"
import { ALL_EVENTS, apiSubject } from "../../contracts/subjects.ts"
import { startNatsServer } from "../../infra/nats-server.ts"
import { type AgentClient, WorkingMemoryClient } from "../../sdk/client.ts"
import { READINESS_PROBE, waitUntilServed } from "../speed/replay.ts"
import { createBenchTopology, spawnService, stopChild } from "../speed/services.ts"
import { percentile } from "../speed/stats.ts"

export interface BurstSizes {
  readonly agents: number
  readonly turns: number
  readonly inFlight: number
  readonly later: number
  readonly laterAfterSeconds: number
  /** How long a later record may take to its first answer and still count as answered. */
  readonly answerWithinMs: number
}

/** How records were first answered: within `answerWithinMs`, or not. */
export interface Answers {
  readonly records: number
  /** Accepted at the first answer. */
  readonly accepted: number
  /** First answered with a typed Overloaded (then waited out and sent again until stored). */
  readonly overloaded: number
  /** First answered with another typed retryable error. */
  readonly refused: number
  /** No answer within `answerWithinMs` (then sent again until stored). */
  readonly unanswered: number
  readonly firstAnswerP50Ms: number
  readonly firstAnswerP99Ms: number
}

export interface BurstFigures {
  readonly embedder: string
  readonly burst: Answers & {
    readonly seconds: number
    /** From the first send to stored, waits for Overloaded included. */
    readonly storedP50Ms: number
    readonly storedP99Ms: number
  }
  readonly later: Answers & {
    /** Answered within `answerWithinMs`, in any of the three ways. */
    readonly answered: number
    readonly firstAnswerMaxMs: number
    readonly storedP99Ms: number
  }
  readonly bystander: {
    readonly builds: number
    readonly p50Ms: number
    readonly p99Ms: number
    readonly maxMs: number
  }
  /** Acknowledged records the log does not hold, and records it holds more than once. */
  readonly lost: number
  readonly storedTwice: number
}

/** Typed answers that mean "nothing was stored, send the same request again", as the SDKs treat them. */
const RETRYABLE: ReadonlySet<string> = new Set(["Unavailable", "NotCaughtUp"])

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms))

/** Runs `work` over `items` with at most `limit` in flight. */
const pooled = async <A>(items: ReadonlyArray<A>, limit: number, work: (item: A, i: number) => Promise<void>) => {
  let next = 0
  await Promise.all(
    Array.from({ length: Math.min(limit, items.length) }, async () => {
      for (let i = next++; i < items.length; i = next++) await work(items[i]!, i)
    }),
  )
}

/** The entry ids of every EntryRecorded event in the log, with how often each occurs. */
const recordedInLog = async (nc: NatsConnection): Promise<Map<string, number>> => {
  const counts = new Map<string, number>()
  await scanLog(nc, { filter: ALL_EVENTS }, ({ event }) => {
    if (event?._tag === "EntryRecorded") counts.set(event.entryId, (counts.get(event.entryId) ?? 0) + 1)
  })
  return counts
}

export const runBurst = async (
  sizes: BurstSizes,
  embedder: string,
  texts: (i: number) => string,
  log: (line: string) => void,
  env: Readonly<Record<string, string>> = {},
): Promise<BurstFigures> => {
  const server = await startNatsServer()
  let client: WorkingMemoryClient | undefined
  let services: ReturnType<typeof spawnService> | undefined
  try {
    // Records are timed to their first answer: the client takes a refusal or a silent wait as it comes,
    // and the loop here waits out an Overloaded refusal and sends the same request again, as the SDKs do.
    client = await WorkingMemoryClient.connect({
      servers: server.url,
      name: "bench-burst",
      overloadedAttempts: 1,
      timeoutMs: sizes.answerWithinMs,
      attempts: 1,
    })
    const bystanderClient = await WorkingMemoryClient.connect({ servers: server.url, name: "bench-burst-bystander" })
    await createBenchTopology(client.nc, server.url)
    services = spawnService("bench/speed/system-runner.ts", server.url, [], { WM_EMBEDDER: embedder, ...env })
    await Promise.race([
      Promise.all(
        ["view.get", "memory.query"].map((op) => waitUntilServed(client!.nc, apiSubject(READINESS_PROBE, op))),
      ),
      services.exited(),
    ])
    const agents = Array.from({ length: sizes.agents }, (_, k) => client!.agent(`burst-${k}`))
    await Promise.all(agents.map((a) => a.register({ role: "main" })))
    const bystander = bystanderClient.agent("bystander")
    await bystander.register({ role: "main" })
    for (let i = 0; i < 20; i++) await bystander.record({ origin: "USER", content: `Bystander note ${i}: ${texts(i)}` })

    const acknowledged: string[] = []
    const buildMs: number[] = []
    let building = true
    const builds = (async () => {
      while (building) {
        const start = performance.now()
        await bystander.buildContext().catch(() => undefined)
        buildMs.push(performance.now() - start)
        await sleep(200)
      }
    })()

    /** Sends records until each is stored, noting how each was first answered and how long it took. */
    const recordAll = async (first: number, count: number) => {
      const tally = { firstAnswerMs: [] as number[], storedMs: [] as number[], accepted: 0, overloaded: 0, refused: 0 }
      let unanswered = 0
      await pooled(
        Array.from({ length: count }, (_, i) => first + i),
        sizes.inFlight,
        async (i) => {
          const agent = agents[i % agents.length] as AgentClient
          const start = performance.now()
          let answer = null as "accepted" | "overloaded" | "refused" | "unanswered" | null
          let answeredAfter = Number.POSITIVE_INFINITY
          const answered = (how: "accepted" | "overloaded" | "refused") => {
            if (answer !== null) return
            answer = how
            answeredAfter = performance.now() - start
          }
          for (;;) {
            try {
              const { entryId } = await agent.record({ origin: "USER", content: texts(i), requestId: `burst-${i}` })
              answered("accepted")
              acknowledged.push(entryId)
              break
            } catch (error) {
              if (error instanceof Overloaded) {
                answered("overloaded")
                await sleep(Math.min(10_000, error.retryAfterMs))
              } else if (RETRYABLE.has((error as { _tag?: unknown })._tag as string)) {
                // another typed, retryable answer (Unavailable while a partition moves)
                answered("refused")
                await sleep(200)
              } else if (typeof (error as { _tag?: unknown })._tag === "string") {
                // a refusal the same request would meet again (a bad entry): the benchmark is wrong, not slow
                throw error
              } else {
                // nothing within the wait: sent again (the same request id) until it is stored
                answer ??= "unanswered"
                await sleep(500)
              }
            }
          }
          tally.storedMs.push(performance.now() - start)
          if (answer === "unanswered" || answeredAfter > sizes.answerWithinMs) unanswered++
          else {
            tally.firstAnswerMs.push(answeredAfter)
            tally[answer!]++
          }
        },
      )
      return { ...tally, unanswered }
    }

    log(`burst (${embedder}): ${sizes.agents} agents, ${sizes.turns} long turns, ${sizes.inFlight} in flight`)
    const burstStart = performance.now()
    const later = (async () => {
      await sleep(sizes.laterAfterSeconds * 1000)
      log(
        `later: ${sizes.later} records, ${Math.round((performance.now() - burstStart) / 1000)} s after the burst began`,
      )
      return recordAll(sizes.turns, sizes.later)
    })()
    const burst = await recordAll(0, sizes.turns)
    const burstSeconds = (performance.now() - burstStart) / 1000
    log(`burst stored in ${burstSeconds.toFixed(1)} s`)
    const laterRun = await later
    building = false
    await builds
    const inLog = await recordedInLog(client.nc)
    const lost = acknowledged.filter((id) => !inLog.has(id)).length
    const storedTwice = [...inLog.values()].filter((n) => n > 1).length
    await bystanderClient.close()
    const ms = (xs: ReadonlyArray<number>, p: number) => Math.round(percentile(xs, p))
    return {
      embedder,
      burst: {
        records: sizes.turns,
        seconds: Number(burstSeconds.toFixed(1)),
        firstAnswerP50Ms: ms(burst.firstAnswerMs, 50),
        firstAnswerP99Ms: ms(burst.firstAnswerMs, 99),
        storedP50Ms: ms(burst.storedMs, 50),
        storedP99Ms: ms(burst.storedMs, 99),
        accepted: burst.accepted,
        overloaded: burst.overloaded,
        refused: burst.refused,
        unanswered: burst.unanswered,
      },
      later: {
        records: sizes.later,
        answered: laterRun.accepted + laterRun.overloaded + laterRun.refused,
        accepted: laterRun.accepted,
        overloaded: laterRun.overloaded,
        refused: laterRun.refused,
        unanswered: laterRun.unanswered,
        firstAnswerP50Ms: ms(laterRun.firstAnswerMs, 50),
        firstAnswerP99Ms: ms(laterRun.firstAnswerMs, 99),
        firstAnswerMaxMs: Math.round(Math.max(0, ...laterRun.firstAnswerMs)),
        storedP99Ms: ms(laterRun.storedMs, 99),
      },
      bystander: {
        builds: buildMs.length,
        p50Ms: ms(buildMs, 50),
        p99Ms: ms(buildMs, 99),
        maxMs: Math.round(Math.max(0, ...buildMs)),
      },
      lost,
      storedTwice,
    }
  } finally {
    await client?.close()
    if (services) await stopChild(services.child)
    await server.stop()
  }
}
