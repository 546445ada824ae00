/**
 * Warm-up replay of the working service against a raw ordered consumer over
 * the same stream, and the peak memory of the working service run as its
 * own process (`node services/working/main.ts`) while it replays.
 */

import { fileURLToPath } from "node:url"
import { DeliverPolicy, jetstream } from "@nats-io/jetstream"
import { connect, errors, type NatsConnection } from "@nats-io/transport-node"
import { ManagedRuntime } from "effect"
import { ALL_EVENTS, apiSubject, EVENTS_STREAM } from "../../contracts/subjects.ts"
import { NatsSettings } from "../../services/platform/nats/settings.ts"
import { workingService } from "../../services/system.ts"
import { Working } from "../../services/working/working.ts"
import { spawnService, stopChild } from "./services.ts"

const rssProbe = fileURLToPath(new URL("./rss-probe.ts", import.meta.url))

/**
 * Milliseconds for a fresh connection and ordered consumer to receive every
 * one of `expected` events of the stream, counting them in the callback.
 */
export const rawConsumeMillis = async (url: string, expected: number): Promise<number> => {
  const start = performance.now()
  const nc = await connect({ servers: url, name: "bench-raw-consume" })
  try {
    const consumer = await jetstream(nc).consumers.get(EVENTS_STREAM, {
      filter_subjects: ALL_EVENTS,
      deliver_policy: DeliverPolicy.All,
    })
    let count = 0
    let done: () => void = () => undefined
    const all = new Promise<void>((resolve) => (done = resolve))
    const messages = await consumer.consume({
      callback: () => {
        if (++count === expected) done()
      },
    })
    await all
    const millis = performance.now() - start
    await messages.close().catch(() => undefined)
    return millis
  } finally {
    await nc.close()
  }
}

/**
 * Milliseconds for a working service, started in this process as
 * bench/warmup.ts starts it, to be built: connected, caught up with the log,
 * serving.
 */
export const serviceReplayMillis = async (url: string, expected: number): Promise<number> => {
  const runtime = ManagedRuntime.make(workingService(NatsSettings.make({ servers: [url], name: "bench-working" })))
  try {
    const start = performance.now()
    const working = await runtime.runPromise(Working)
    const millis = performance.now() - start
    if (working.warmUp.events !== expected)
      throw new Error(`replayed ${working.warmUp.events} events, expected ${expected}`)
    return millis
  } finally {
    await runtime.dispose()
  }
}

/** An agent that never exists: asking for its view writes nothing and is answered once the service serves. */
export const READINESS_PROBE = "bench-readiness-probe"

/** Asks until something serves `subject`; any reply, even a refusal, means it is up. */
export const waitUntilServed = async (nc: NatsConnection, subject: string, timeoutMs = 120_000): Promise<void> => {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    try {
      await nc.request(subject, "{}", { timeout: 2_000 })
      return
    } catch (error) {
      // No responders arrives wrapped in a RequestError.
      const notYet =
        error instanceof errors.TimeoutError ||
        error instanceof errors.NoRespondersError ||
        (error instanceof errors.RequestError && error.isNoResponders())
      if (!notYet || Date.now() > deadline) throw error
      await new Promise((r) => setTimeout(r, 20))
    }
  }
}

export interface ServiceProcessFigures {
  /** From spawning the process until it answers requests (Node start-up included). */
  readonly readyMs: number
  /** Peak resident set size of the process, in MB (2^20 bytes). */
  readonly peakRssMb: number
}

/**
 * Starts `node services/working/main.ts` against the server, waits until it
 * has replayed the log and serves, and reads its peak RSS (maxRSS, reported
 * from inside the process by a preloaded probe), then stops it.
 */
export const workingProcessFigures = async (nc: NatsConnection, url: string): Promise<ServiceProcessFigures> => {
  const start = performance.now()
  const working = spawnService("services/working/main.ts", url, ["--import", rssProbe])
  try {
    await Promise.race([waitUntilServed(nc, apiSubject(READINESS_PROBE, "view.get")), working.exited()])
    const readyMs = performance.now() - start
    const maxRssKb = await new Promise<number>((resolve, reject) => {
      working.child.once("message", (m: unknown) =>
        typeof m === "object" && m !== null && typeof (m as { maxRssKb?: unknown }).maxRssKb === "number"
          ? resolve((m as { maxRssKb: number }).maxRssKb)
          : reject(new Error(`unexpected message from the working service: ${JSON.stringify(m)}`)),
      )
      working.child.send("maxRss")
    })
    return { readyMs, peakRssMb: maxRssKb / 1024 }
  } finally {
    await stopChild(working.child)
  }
}
