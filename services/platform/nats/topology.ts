/**
 * The streams every service relies on, created or updated idempotently at
 * service start. Only features of nats-server 2.9 are used: single-subject
 * filters, Nats-Msg-Id dedupe, Nats-Expected-Last-Subject-Sequence, direct get.
 *
 * The event stream's limits (WM_STREAM_MAX_BYTES, WM_STREAM_MAX_MSGS) discard
 * new writes, never old events: the log is the only copy of every agent's
 * registration and budget, and of everything acknowledged, so a full stream
 * refuses writes (`StorageFull`) instead of dropping its oldest events. There
 * is no age limit for the same reason. Limits set on the stream by other means
 * are replaced by the configured ones at service start.
 */
import {
  DiscardPolicy,
  JetStreamApiCodes,
  JetStreamApiError,
  type JetStreamManager,
  RetentionPolicy,
  StorageType,
  type StreamConfig,
} from "@nats-io/jetstream"
import { Effect, Schedule } from "effect"
import { ALL_EVENTS, DEAD_LETTER_ROOT, DEAD_LETTER_STREAM, EVENTS_STREAM } from "../../../contracts/subjects.ts"
import type { NatsSettingsShape } from "./settings.ts"

const nanos = (ms: number) => ms * 1_000_000

export const eventStreamConfig = (
  settings: Pick<NatsSettingsShape, "replicas" | "dedupeWindowMs" | "streamMaxBytes" | "streamMaxMsgs">,
): Partial<StreamConfig> & { readonly name: string } => ({
  name: EVENTS_STREAM,
  subjects: [ALL_EVENTS],
  storage: StorageType.File,
  retention: RetentionPolicy.Limits,
  discard: DiscardPolicy.New,
  max_bytes: settings.streamMaxBytes ?? -1,
  max_msgs: settings.streamMaxMsgs ?? -1,
  max_age: 0,
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

/**
 * A limit below what the stream already holds is raised to it: nats-server 2.9 enforces a lowered limit
 * by deleting the oldest messages whatever the discard policy — the registrations first. At that level
 * the stream is full, and new writes are refused until space is freed or the limit raised.
 */
const notBelowStored = (
  config: Partial<StreamConfig> & { readonly name: string },
  stored: { readonly bytes: number; readonly messages: number },
): { readonly config: Partial<StreamConfig> & { readonly name: string }; readonly warning: string | null } => {
  const bytes = config.max_bytes !== undefined && config.max_bytes > 0 && stored.bytes > config.max_bytes
  const messages = config.max_msgs !== undefined && config.max_msgs > 0 && stored.messages > config.max_msgs
  if (!bytes && !messages) return { config, warning: null }
  return {
    config: {
      ...config,
      ...(bytes ? { max_bytes: stored.bytes } : {}),
      ...(messages ? { max_msgs: stored.messages } : {}),
    },
    warning:
      `[topology] ${config.name} already holds ${stored.bytes} bytes in ${stored.messages} messages, above the configured ` +
      `limit (max_bytes ${config.max_bytes}, max_msgs ${config.max_msgs}); the limit is set to what is stored, so nothing ` +
      `is dropped and new writes are refused until space is freed`,
  }
}

const ensureStream = (jsm: JetStreamManager, wanted: Partial<StreamConfig> & { readonly name: string }) =>
  Effect.tryPromise({
    try: async () => {
      const name = wanted.name
      let config = wanted
      let warning: string | null = null
      let created: string
      try {
        const info = await jsm.streams.info(name)
        created = info.created
        const current = info.config
        ;({ config, warning } = notBelowStored(wanted, info.state))
        const differs = (["duplicate_window", "discard", "max_bytes", "max_msgs", "max_age"] as const).some(
          (key) => key in config && current[key] !== config[key],
        )
        if (differs || JSON.stringify(current.subjects) !== JSON.stringify(config.subjects)) {
          await jsm.streams.update(name, { ...current, ...config } as StreamConfig)
        }
      } catch (err) {
        if (err instanceof JetStreamApiError && err.code === JetStreamApiCodes.StreamNotFound)
          created = (await jsm.streams.add(config)).created
        else throw err
      }
      return { warning, created }
    },
    catch: (cause) => new Error(`cannot create stream ${wanted.name}: ${String(cause)}`, { cause }),
  }).pipe(
    // Right after a cluster starts or fails over, JetStream answers "not ready" for a few seconds.
    Effect.retry(Schedule.spaced("250 millis").pipe(Schedule.upTo({ duration: "30 seconds" }))),
    Effect.tap(({ warning }) => (warning === null ? Effect.void : Effect.logWarning(warning))),
    Effect.map(({ created }) => created),
  )

/** Creates or updates both streams; gives when the events stream was created, which tells one log from another. */
export const ensureTopology = (jsm: JetStreamManager, settings: NatsSettingsShape) =>
  Effect.map(
    Effect.all([ensureStream(jsm, eventStreamConfig(settings)), ensureStream(jsm, deadLetterStreamConfig(settings))]),
    ([eventsCreated]) => eventsCreated,
  )
