/**
 * Runs the dashboard alone: `node services/dashboard/main.ts` (NATS_URL, NATS_USER, NATS_PASS;
 * WM_DASHBOARD_PORT, WM_DASHBOARD_HOST, WM_DASHBOARD_DIR). Serves the page built by
 * `npm run build:dashboard`.
 */
import { NodeRuntime } from "@effect/platform-node"
import { Effect, Layer } from "effect"
import { NatsSettings } from "../platform/nats/settings.ts"
import { serviceProcess } from "../platform/observability/observability.ts"
import { Dashboard, dashboardService } from "./dashboard.ts"

const announce = Layer.effectDiscard(
  Effect.gen(function* () {
    const dashboard = yield* Dashboard
    yield* Effect.log(`Dashboard on ${dashboard.url}${dashboard.authenticated ? " (NATS credentials required)" : ""}`)
  }),
)

NodeRuntime.runMain(
  Layer.launch(
    serviceProcess("dashboard", announce.pipe(Layer.provide(dashboardService(NatsSettings.fromEnv("wm-dashboard"))))),
  ),
)
