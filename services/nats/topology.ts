/**
 * The streams every service relies on, created or updated idempotently at
 * service start. Only features of nats-server 2.9 are used: single-subject
 * filters, Nats-Msg-Id dedupe, Nats-Expected-Last-Subject-Sequence, direct get.
 */
import {
  DiscardPolicy,
  JetStreamApiError,
  RetentionPolicy,
  StorageType,
  type JetStreamManager,
  type StreamConfig,
} from "@nats-io/jetstream"
import { Effect, Schedule } from "effect"
import { ALL_EVENTS, DEAD_LETTER_ROOT, DEAD_LETTER_STREAM, EVENTS_STREAM } from "../../contracts/subjects.ts"
import type { NatsSettingsShape } from "./settings.ts"

const nanos = (ms: number) => ms * 1_000_000

export const eventStreamConfig = (
  settings: Pick<NatsSettingsShape, "replicas" | "dedupeWindowMs">,
): Partial<StreamConfig> & { readonly name: string } => ({
  name: EVENTS_STREAM,
  subjects: [ALL_EVENTS],
  storage: StorageType.File,
  retention: RetentionPolicy.Limits,
  discard: DiscardPolicy.Old,
  num_replicas: settings.replicas,
  duplicate_window: nanos(settings.dedupeWindowMs),
  allow_direct: true,
  // Forgetting erases an entry's (or an agent's) messages one by one; nothing else deletes events.
  deny_delete: false,
  deny_purge: false,
  max_msg_size: 1024 * 1024,
})

export const deadLetterStreamConfig = (
  settings: Pick<NatsSettingsShape, "replicas">,
): Partial<StreamConfig> & { readonly name: string } => ({
  name: DEAD_LETTER_STREAM,
  subjects: [`${DEAD_LETTER_ROOT}.>`],
  storage: StorageType.File,
  num_replicas: settings.replicas,
  max_age: nanos(30 * 24 * 3600_000),
})

const ensureStream = (jsm: JetStreamManager, config: Partial<StreamConfig> & { readonly name: string }) =>
  Effect.tryPromise({
    try: async () => {
      const name = config.name
      try {
        const info = await jsm.streams.info(name)
        const current = info.config
        if (
          current.duplicate_window !== config.duplicate_window ||
          JSON.stringify(current.subjects) !== JSON.stringify(config.subjects)
        ) {
          await jsm.streams.update(name, { ...current, ...config } as StreamConfig)
        }
      } catch (err) {
        if (err instanceof JetStreamApiError && err.code === 10059) await jsm.streams.add(config)
        else throw err
      }
    },
    catch: (cause) => new Error(`cannot create stream ${config.name}: ${String(cause)}`, { cause }),
  }).pipe(
    // Right after a cluster starts or fails over, JetStream answers "not ready" for a few seconds.
    Effect.retry(Schedule.spaced("250 millis").pipe(Schedule.upTo({ duration: "30 seconds" }))),
  )

export const ensureTopology = (jsm: JetStreamManager, settings: NatsSettingsShape) =>
  Effect.all([ensureStream(jsm, eventStreamConfig(settings)), ensureStream(jsm, deadLetterStreamConfig(settings))], {
    discard: true,
  })
