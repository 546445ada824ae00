/**
 * The dashboard service: follows the whole event log (an ordered consumer from the first event,
 * then live), folds it into the read model, and serves the page, its JSON API and a live event
 * stream over HTTP. It writes nothing: no API call, no stream or consumer it keeps.
 */
import type { AddressInfo } from "node:net"
import { join } from "node:path"
import { Context, Effect, Layer, Option } from "effect"
import { decodeEvent } from "../../contracts/decode.ts"
import { settings as declared } from "../../contracts/settings.ts"
import { DEFAULT_FADE_CONFIG } from "../../domain/fade-score.ts"
import { ContentKeys } from "../platform/keys/content-keys.ts"
import { deliverWithKeys, followEvents } from "../platform/log/event-log.ts"
import { Nats } from "../platform/nats/connection.ts"
import { NatsSettings } from "../platform/nats/settings.ts"
import { createDashboardServer } from "./http.ts"
import { DashboardModel, type TimelineItem } from "./read-model.ts"

export const DEFAULT_DASHBOARD_PORT = Number(declared.WM_DASHBOARD_PORT.default)
/** Where `npm run build:dashboard` writes the page. */
export const DEFAULT_ASSETS_DIR = join(import.meta.dirname, "..", "..", "dashboard", "dist")

export interface DashboardSettingsShape {
  /** 0: any free port. */
  readonly port: number
  readonly host: string
  readonly assetsDir: string
  /** τ the fade service applies when an agent sets none (WM_FADE_TAU), shown against each agent's usage. */
  readonly tau: number
}

export class DashboardSettings extends Context.Service<DashboardSettings, DashboardSettingsShape>()(
  "wm/DashboardSettings",
) {
  static readonly make = (settings: Partial<DashboardSettingsShape> = {}) =>
    Layer.succeed(DashboardSettings, {
      port: DEFAULT_DASHBOARD_PORT,
      host: "127.0.0.1",
      assetsDir: DEFAULT_ASSETS_DIR,
      tau: DEFAULT_FADE_CONFIG.tau,
      ...settings,
    })

  /** WM_DASHBOARD_PORT, WM_DASHBOARD_HOST, WM_DASHBOARD_DIR, WM_FADE_TAU. */
  static readonly fromEnv = (overrides: Partial<DashboardSettingsShape> = {}) =>
    Layer.effect(
      DashboardSettings,
      Effect.gen(function* () {
        const port = yield* declared.WM_DASHBOARD_PORT.config
        const host = yield* declared.WM_DASHBOARD_HOST.config
        const dir = yield* declared.WM_DASHBOARD_DIR.config
        const tau = yield* declared.WM_FADE_TAU.config
        return { port, host, assetsDir: Option.getOrElse(dir, () => DEFAULT_ASSETS_DIR), tau, ...overrides }
      }).pipe(Effect.orDie),
    )
}

export interface DashboardShape {
  /** Where the page is served, e.g. http://127.0.0.1:4380/ */
  readonly url: string
  readonly model: DashboardModel
  /** Whether the page asks for the NATS credentials. */
  readonly authenticated: boolean
}

export class Dashboard extends Context.Service<Dashboard, DashboardShape>()("wm/Dashboard") {
  static readonly make = Effect.gen(function* () {
    const { js } = yield* Nats
    const keys = yield* ContentKeys
    const nats = yield* NatsSettings
    const settings = yield* DashboardSettings
    const model = new DashboardModel({ ...DEFAULT_FADE_CONFIG, tau: settings.tau })
    const listeners = new Set<(agentId: string, item: TimelineItem) => void>()

    yield* Effect.acquireRelease(
      Effect.promise(async () => {
        let stopped = false
        let close: () => Promise<void> = async () => undefined
        // The stream may not exist yet (the dashboard started before any service): wait for it.
        const follow = async () => {
          while (!stopped) {
            try {
              // A key it cannot have is no reason to stop: what it cannot open shows as forgotten.
              const delivery = deliverWithKeys(
                { ...keys, load: (data, subject) => keys.load(data, subject).catch(() => undefined) },
                (record) => {
                  // What a forget made unreadable shows as forgotten, beside the event's metadata.
                  const decoded = decodeEvent(record.data, keys.unsealOrRedact)
                  if (!decoded.ok) return
                  const item = model.add({ seq: record.seq, subject: record.subject, event: decoded.event })
                  for (const listener of listeners) listener(decoded.event.agentId, item)
                },
                () => undefined,
              )
              const subscription = await followEvents(js, {
                fromSeq: model.lastSeq + 1,
                onRecord: delivery.onRecord,
              })
              close = async () => {
                delivery.stop()
                await subscription.stop()
              }
              return
            } catch {
              await new Promise((r) => setTimeout(r, 500))
            }
          }
        }
        void follow()
        return {
          stop: async () => {
            stopped = true
            await close()
          },
        }
      }),
      (following) => Effect.promise(() => following.stop()),
    )

    const credentials =
      nats.user !== undefined && nats.pass !== undefined ? { user: nats.user, pass: nats.pass } : undefined
    const server = yield* Effect.acquireRelease(
      Effect.tryPromise({
        try: () =>
          new Promise<ReturnType<typeof createDashboardServer>>((resolve, reject) => {
            const server = createDashboardServer(
              { model, assetsDir: settings.assetsDir, credentials },
              {
                subscribe: (listener) => {
                  listeners.add(listener)
                  return () => void listeners.delete(listener)
                },
              },
            )
            server.once("error", reject)
            server.listen(settings.port, settings.host, () => resolve(server))
          }),
        catch: (error) =>
          new Error(
            `the dashboard cannot listen on ${settings.host}:${settings.port} (WM_DASHBOARD_PORT): ${String(error)}`,
          ),
      }),
      (server) =>
        Effect.promise(
          () =>
            new Promise<void>((resolve) => {
              server.closeAllConnections()
              server.close(() => resolve())
            }),
        ),
    )
    const { port } = server.address() as AddressInfo
    const host = settings.host.includes(":") ? `[${settings.host}]` : settings.host
    return { url: `http://${host}:${port}/`, model, authenticated: credentials !== undefined } satisfies DashboardShape
  })

  static readonly layer = Layer.effect(Dashboard, Dashboard.make)
}

/** The dashboard on its own connection, with the NATS settings given and its own (WM_DASHBOARD_*) by default. */
export const dashboardService = (
  settings: Layer.Layer<NatsSettings>,
  dashboard: Layer.Layer<DashboardSettings> = DashboardSettings.fromEnv(),
) =>
  Dashboard.layer.pipe(
    Layer.provide(
      Layer.mergeAll(
        dashboard,
        ContentKeys.layer.pipe(Layer.provideMerge(Layer.fresh(Nats.layer)), Layer.provideMerge(settings)),
      ),
    ),
  )
