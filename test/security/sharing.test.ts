/**
 * WM_TENANTS, as the retrieval service reads it (Effect Config): who sees whose entries in a thread.
 */
import { ConfigProvider, Effect, Exit, Layer } from "effect"
import { describe, expect, it } from "vitest"
import { natsAuth } from "../../infra/auth.ts"
import { AgentSharing, type AgentSharingShape } from "../../services/platform/access/sharing.ts"

const sharingFrom = (env: Record<string, string>) =>
  Effect.runPromiseExit(
    Effect.gen(function* () {
      return yield* AgentSharing
    }).pipe(
      Effect.provide(AgentSharing.fromEnv.pipe(Layer.provide(ConfigProvider.layer(ConfigProvider.fromEnv({ env }))))),
    ),
  )

const visible = (sharing: AgentSharingShape, agentId: string) => [...sharing.visibleTo(agentId)].sort()

describe("WM_TENANTS", () => {
  it("an agent sees itself and the agents of every tenant it is in; an agent in none sees only itself", async () => {
    const exit = await sharingFrom({ WM_TENANTS: "acme=planner,critic; beta=critic,scout" })
    expect(Exit.isSuccess(exit)).toBe(true)
    const sharing = (exit as Exit.Success<AgentSharingShape>).value
    expect(visible(sharing, "planner")).toEqual(["critic", "planner"])
    expect(visible(sharing, "critic")).toEqual(["critic", "planner", "scout"])
    expect(visible(sharing, "scout")).toEqual(["critic", "scout"])
    expect(visible(sharing, "loner")).toEqual(["loner"])
  })

  it("unset, every agent sees only its own entries", async () => {
    const exit = await sharingFrom({})
    expect(visible((exit as Exit.Success<AgentSharingShape>).value, "planner")).toEqual(["planner"])
  })

  it("is what auth-config's tenants say", async () => {
    const auth = natsAuth({
      agents: ["planner", "critic", "scout"],
      tenants: [{ name: "acme", agents: ["planner", "critic"] }],
    })
    const exit = await sharingFrom({ WM_TENANTS: auth.tenantsVariable })
    expect(visible((exit as Exit.Success<AgentSharingShape>).value, "critic")).toEqual(["critic", "planner"])
  })

  it("a malformed value stops the service, naming the variable and the part", async () => {
    for (const [value, reason] of [
      ["acme", "'acme' is not <tenant>=<agent>,<agent>…"],
      ["acme=", "tenant 'acme' names no agent"],
      ["acme=planner,cr.tic", "agent id 'cr.tic' of tenant 'acme' must be"],
    ] as const) {
      const exit = await sharingFrom({ WM_TENANTS: value })
      expect(Exit.isFailure(exit)).toBe(true)
      expect(String(exit)).toContain(`WM_TENANTS: ${reason}`)
    }
  })
})
