/**
 * Which agents' memory a caller may see through the operations that answer
 * across agents (`memory.thread`): its own, and that of the agents it shares
 * a tenant with — nobody else's. The tenants are the ones the broker
 * permissions are generated from (`npm run wm -- auth-config --tenant
 * acme=planner,critic` writes them to the env file as WM_TENANTS), so the
 * broker and the services agree on who belongs together.
 *
 *   WM_TENANTS="acme=planner,critic; beta=scout"     unset: every agent sees only its own memory
 */
import { Config, Context, Effect, Layer } from "effect"
import { invalidSetting, settings } from "../../../contracts/settings.ts"
import { parseTenants, type Tenant } from "../../../contracts/tenants.ts"

export { formatTenants, parseTenants, type Tenant } from "../../../contracts/tenants.ts"

export interface AgentSharingShape {
  readonly tenants: ReadonlyArray<Tenant>
  /** The agents whose entries `agentId` may see: itself and its tenants' agents. */
  readonly visibleTo: (agentId: string) => ReadonlySet<string>
}

const sharingOf = (tenants: ReadonlyArray<Tenant>): AgentSharingShape => {
  const visible = new Map<string, Set<string>>()
  for (const t of tenants) {
    for (const a of t.agents) {
      const set = visible.get(a) ?? new Set([a])
      for (const b of t.agents) set.add(b)
      visible.set(a, set)
    }
  }
  return { tenants, visibleTo: (agentId) => visible.get(agentId) ?? new Set([agentId]) }
}

/** WM_TENANTS, read with Effect Config like every other setting; a malformed value fails naming the variable. */
export const tenantsConfig: Config.Config<Tenant[]> = settings.WM_TENANTS.config.pipe(
  Config.mapEffect((text) =>
    Effect.try({
      try: () => parseTenants(text),
      catch: (error) =>
        invalidSetting(settings.WM_TENANTS.name, error instanceof Error ? error.message : String(error)),
    }),
  ),
)

export class AgentSharing extends Context.Service<AgentSharing, AgentSharingShape>()("wm/AgentSharing") {
  static readonly make = (tenants: ReadonlyArray<Tenant> = []) => Layer.succeed(AgentSharing, sharingOf(tenants))
  static readonly fromEnv = Layer.effect(AgentSharing, Effect.map(tenantsConfig, sharingOf)).pipe(Layer.orDie)
}
