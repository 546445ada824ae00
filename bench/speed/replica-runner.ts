/**
 * One more replica of the gateway and the working service, in a process of its own, with settings from
 * the environment (NATS_URL…): what the step benchmark starts beside the system to see how requests fan
 * out over replicas.
 */
import { NodeRuntime } from "@effect/platform-node"
import { Layer } from "effect"
import { NatsSettings } from "../../services/platform/nats/settings.ts"
import { gatewayService, workingService } from "../../services/system.ts"

NodeRuntime.runMain(
  Layer.launch(
    Layer.mergeAll(
      gatewayService(NatsSettings.fromEnv("wm-gateway-replica")),
      workingService(NatsSettings.fromEnv("wm-working-replica")),
    ),
  ),
)
