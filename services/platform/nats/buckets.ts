/**
 * KV buckets, created idempotently at service start: the substrate (raw text
 * of every entry ever recorded) and the projections' checkpoints.
 */
import { type KV, Kvm } from "@nats-io/kv"
import { Effect, Schedule } from "effect"
import { Nats } from "./connection.ts"
import { NatsSettings } from "./settings.ts"

export const openBucket = (name: string, options: { readonly history?: number } = {}) =>
  Effect.gen(function* () {
    const { js } = yield* Nats
    const settings = yield* NatsSettings
    return yield* Effect.tryPromise({
      try: (): Promise<KV> =>
        new Kvm(js).create(name, {
          replicas: settings.replicas,
          history: options.history ?? 1,
          storage: "file" as never,
        }),
      catch: (cause) => new Error(`cannot open KV bucket ${name}: ${String(cause)}`, { cause }),
    }).pipe(Effect.retry(Schedule.spaced("250 millis").pipe(Schedule.upTo({ duration: "30 seconds" }))), Effect.orDie)
  })
