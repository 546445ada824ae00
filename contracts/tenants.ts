/**
 * Tenants: named groups of agents, declared once for the deployment
 *
 *   WM_TENANTS="acme=planner,critic; beta=scout"
 *
 * The broker permissions are generated from them, `memory.thread` spans them
 * (services/platform/access/sharing.ts), and partition pins name them
 * (contracts/partition-pins.ts). An agent may be in several tenants.
 */
import { isSubjectToken } from "./ids.ts"

export interface Tenant {
  readonly name: string
  readonly agents: ReadonlyArray<string>
}

/** Parses `name=agent,agent` lists separated by `;` or whitespace; throws naming the bad part. */
export const parseTenants = (text: string): Tenant[] =>
  text
    .split(/[;\s]+/)
    .filter((part) => part.length > 0)
    .map((part) => {
      const [name, list, ...rest] = part.split("=")
      if (!name || list === undefined || rest.length > 0) throw new Error(`'${part}' is not <tenant>=<agent>,<agent>…`)
      if (!isSubjectToken(name))
        throw new Error(`tenant name '${name}' must be 1-64 characters of A-Z, a-z, 0-9, '_' or '-'`)
      const agents = list.split(",").filter((a) => a.length > 0)
      if (agents.length === 0) throw new Error(`tenant '${name}' names no agent`)
      for (const a of agents)
        if (!isSubjectToken(a))
          throw new Error(`agent id '${a}' of tenant '${name}' must be 1-64 characters of A-Z, a-z, 0-9, '_' or '-'`)
      return { name, agents }
    })

/** The WM_TENANTS value for these tenants. */
export const formatTenants = (tenants: ReadonlyArray<Tenant>): string =>
  tenants.map((t) => `${t.name}=${t.agents.join(",")}`).join(";")
