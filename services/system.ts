/**
 * Composition of the services. Each service is a layer that starts serving
 * when built; `systemLayer` composes them all into one process, the embedded
 * default. Deployed apart, each runs alone (services/<name>/main.ts) and they
 * meet only through the event log, the API subjects and the stores they
 * publish (the long-term collections, the partition snapshots).
 */
import { Effect, Layer } from "effect"
import { FadeWorker, FadeWorkerSettings } from "./fade/fade-worker.ts"
import { Summarizer } from "./fade/summarizer.ts"
import type { Gateway } from "./gateway/gateway.ts"
import { gatewayService } from "./gateway/service.ts"
import { GatewaySettings } from "./gateway/settings.ts"
import { LongTerm } from "./memory/longterm/longterm.ts"
import { longTermStoreConfig } from "./memory/longterm/qdrant-config.ts"
import { sealedStoreLayer } from "./memory/longterm/sealed-store.ts"
import type { LongTermStore } from "./memory/longterm/store.ts"
import { Retrieval, RetrievalSettings } from "./memory/retrieval/retrieval.ts"
import { AgentSharing } from "./platform/access/sharing.ts"
import { serveUnknownOperations } from "./platform/api/serve.ts"
import { EmbeddingProvider } from "./platform/embedding/embedding-provider.ts"
import { foundation } from "./platform/foundation.ts"
import type { NatsSettings } from "./platform/nats/settings.ts"
import { serviceLogs } from "./platform/observability/json-logs.ts"
import { PartitionSettings } from "./platform/partitions/settings.ts"
import { SubstrateReader } from "./platform/substrate-reader.ts"
import { ForgetEraser } from "./substrate/eraser.ts"
import { Substrate } from "./substrate/substrate.ts"
import { workingService } from "./working/service.ts"
import type { Working } from "./working/working.ts"

type Settings = Layer.Layer<NatsSettings>

export { foundation, gatewayService, workingService }
/** The substrate (raw text read from the log), and beside it the eraser that finishes every forget. */
export const substrateService = (
  settings: Settings,
  partitions: Layer.Layer<PartitionSettings> = PartitionSettings.fromEnv,
) =>
  Layer.merge(Substrate.layer, ForgetEraser.layer).pipe(
    Layer.provide(Layer.mergeAll(foundation(settings), partitions, serviceLogs("substrate"))),
  )

/** The embedding models fading and retrieval share: records and queries must embed alike. */
export const defaultModels = () => Layer.merge(Summarizer.fromEnv(), EmbeddingProvider.fromEnv())

/** The fade worker with its summariser and embedder as configured by the environment. */
export const fadeService = (
  settings: Settings,
  worker: Layer.Layer<FadeWorkerSettings> = FadeWorkerSettings.fromEnv(),
  models: Layer.Layer<Summarizer | EmbeddingProvider, unknown> = defaultModels(),
  partitions: Layer.Layer<PartitionSettings> = PartitionSettings.fromEnv,
) =>
  // Fade also refuses operations the API does not have: it serves no operation itself, so no request reaches
  // its connection twice (a server with allow_responses refuses a reply from a connection that got the request twice).
  Layer.merge(FadeWorker.layer, Layer.effectDiscard(serveUnknownOperations)).pipe(
    Layer.provide(Layer.mergeAll(worker, models, foundation(settings), partitions, serviceLogs("fade"))),
  )

/**
 * Long-term projection and retrieval, side by side on one store: the
 * embedded index by default (in memory, rebuilt from the log at start; on
 * disk under WM_LONGTERM_DIR, resumed from its own checkpoint), or Qdrant
 * when QDRANT_URL is set (durable: the projection resumes from its
 * checkpoint in the checkpoint bucket).
 */
export const memoryService = (
  settings: Settings,
  options: {
    readonly store?: Layer.Layer<LongTermStore, unknown>
    readonly durable?: boolean
    readonly models?: Layer.Layer<EmbeddingProvider, unknown>
    readonly retrieval?: Layer.Layer<RetrievalSettings>
    /** Who sees whose entries across agents (default: WM_TENANTS). */
    readonly sharing?: Layer.Layer<AgentSharing>
    /** How its replicas divide the partitions (default: WM_PARTITIONS, WM_LEASE_* and WM_REPLICA_ID). */
    readonly partitions?: Layer.Layer<PartitionSettings>
  } = {},
) => {
  const base = foundation(settings)
  // The projection and retrieval share one instance of the store.
  const longTermOn = (plain: Layer.Layer<LongTermStore, unknown>, durable: boolean) => {
    // What it keeps of an entry's content is sealed under the entry's key.
    const store = sealedStoreLayer.pipe(Layer.provide(Layer.merge(plain, base)))
    return Layer.merge(LongTerm.layer({ durable }).pipe(Layer.provide(Layer.merge(store, base))), store)
  }
  const longTerm = options.store
    ? longTermOn(options.store, options.durable ?? false)
    : Layer.unwrap(
        Effect.map(longTermStoreConfig.pipe(Effect.orDie), ({ store, durable }) => longTermOn(store, durable)),
      )
  const deps = Layer.mergeAll(
    longTerm,
    options.models ?? EmbeddingProvider.fromEnv(),
    SubstrateReader.layer.pipe(Layer.provide(base)),
    options.retrieval ?? RetrievalSettings.make(),
    options.sharing ?? AgentSharing.fromEnv,
    options.partitions ?? PartitionSettings.fromEnv,
    base,
  )
  return Retrieval.layer.pipe(Layer.provideMerge(deps), Layer.provide(serviceLogs("memory")))
}

export interface SystemOptions {
  /** Run the fade worker (default true). */
  readonly fade?: boolean
  /** Run substrate, long-term and retrieval (default true). */
  readonly memory?: boolean
  /** Who sees whose entries across agents (default: WM_TENANTS). */
  readonly sharing?: Layer.Layer<AgentSharing>
}

/** Every service in one process, each with its own connection, as they would run apart. */
export const systemLayer = (
  settings: (service: string) => Settings,
  options: SystemOptions = {},
): Layer.Layer<Working | Gateway, unknown> => {
  // One instance of the models for the whole process: fading embeds records, retrieval embeds queries.
  const models = defaultModels()
  const core = Layer.mergeAll(
    workingService(settings("wm-working")),
    // Its requests share this event loop with the reads the other services serve (api/admission.ts).
    gatewayService(settings("wm-gateway"), PartitionSettings.fromEnv, GatewaySettings.fromEnv("withOtherServices")),
  )
  const withFade =
    options.fade === false
      ? core
      : Layer.merge(core, fadeService(settings("wm-fade"), FadeWorkerSettings.fromEnv(), models))
  return options.memory === false
    ? withFade
    : Layer.mergeAll(
        withFade,
        substrateService(settings("wm-substrate")),
        memoryService(settings("wm-memory"), { models, ...(options.sharing ? { sharing: options.sharing } : {}) }),
      )
}
