/**
 * docker-compose.yml is closed by default. No Docker engine here, so the file is read as Docker would read it
 * (test/support/compose-file.ts: the YAML it uses, and compose's interpolation) against the env file that the
 * documented step writes — `npm run wm -- auth-config ... --out <conf> --compose-env <env>`, run as a process — and:
 * every published port listens on 127.0.0.1 only; every service container logs in to NATS as its own user from
 * the env file, and a real nats-server started with the generated configuration accepts exactly those logins;
 * Qdrant and the service that reaches it require QDRANT_API_KEY; without the env file the file does not start.
 */

import { spawnSync } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { connect } from "@nats-io/transport-node"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import {
  COMPOSE_SERVICES,
  NATS_CONFIG_VARIABLE,
  natsPassVariable,
  natsUserVariable,
} from "../../infra/deployment-env.ts"
import { startNatsServer } from "../../infra/nats-server.ts"
import { parseKeyEncryptionKeys } from "../../services/platform/keys/kek.ts"
import { interpolate, interpolateAll, parseComposeYaml, parseEnvFile, type Yaml } from "../support/compose-file.ts"

const REPO = fileURLToPath(new URL("../..", import.meta.url))
const NODE = join(REPO, "node_modules", ".bin", "node")

type Service = { [key: string]: Yaml }
let dir: string
let source: Record<string, Service>
let env: Map<string, string>
let config: string

const services = () => Object.entries(source)
const environmentOf = (s: Service) => (s.environment ?? {}) as Record<string, string>

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "wm-compose-"))
  const run = spawnSync(
    NODE,
    [
      "cli/wm.ts",
      "auth-config",
      "--agent",
      "planner",
      "--agent",
      "critic",
      "--tenant",
      "acme=planner,critic",
      "--credentials",
      join(dir, "credentials.json"),
      "--out",
      join(dir, "nats-auth.conf"),
      "--compose-env",
      join(dir, ".env"),
    ],
    { cwd: REPO, encoding: "utf8" },
  )
  expect(run.status, run.stderr).toBe(0)
  env = parseEnvFile(readFileSync(join(dir, ".env"), "utf8"))
  config = readFileSync(join(dir, "nats-auth.conf"), "utf8")
  source = (
    parseComposeYaml(readFileSync(join(REPO, "docker-compose.yml"), "utf8")) as { services: Record<string, Service> }
  ).services
})
afterAll(() => rmSync(dir, { recursive: true, force: true }))

describe("docker-compose.yml", () => {
  it("publishes every port on 127.0.0.1 only, the NATS monitoring port included", () => {
    const published = services().flatMap(([name, s]) =>
      ((s.ports ?? []) as string[]).map((p) => [name, interpolate(p, env)] as const),
    )
    expect(published.map(([name, p]) => `${name} ${p}`).sort()).toEqual([
      "nats 127.0.0.1:4222:4222",
      "nats 127.0.0.1:8222:8222",
      "qdrant 127.0.0.1:6333:6333",
    ])
  })

  it("runs NATS with the generated configuration and every service container as its own user from the env file", async () => {
    const nats = source.nats!
    expect(nats.command).toEqual(expect.arrayContaining(["-c", "/etc/nats/auth.conf"]))
    const mounts = (nats.volumes as string[]).map((v) => interpolate(v, env))
    expect(mounts).toContain(`${join(dir, "nats-auth.conf")}:/etc/nats/auth.conf:ro`)
    expect(env.get(NATS_CONFIG_VARIABLE)).toBe(join(dir, "nats-auth.conf"))

    // The containers built from this repository are exactly the services the env file has users for.
    // (A second shard of a service is `<service>-2`, logging in as the service.)
    const built = services()
      .filter(([, s]) => s.build !== undefined)
      .map(([name]) => name.replace(/-\d+$/, ""))
    expect([...new Set(built)].sort()).toEqual([...COMPOSE_SERVICES].sort())
    const logins = COMPOSE_SERVICES.map((name) => {
      const e = environmentOf(source[name]!)
      // Required, never defaulted: the file does not start without the generated settings.
      expect(e.NATS_USER).toMatch(new RegExp(`^\\$\\{${natsUserVariable(name)}:\\?.*auth-config.*\\}$`))
      expect(e.NATS_PASS).toMatch(new RegExp(`^\\$\\{${natsPassVariable(name)}:\\?.*auth-config.*\\}$`))
      // Every service opens the content keys with the same key-encryption key, which the env file holds.
      expect(e.WM_KEY_ENCRYPTION_KEYS).toMatch(/^\$\{WM_KEY_ENCRYPTION_KEYS:\?.*auth-config.*\}$/)
      expect(parseKeyEncryptionKeys(interpolate(e.WM_KEY_ENCRYPTION_KEYS!, env)).development).toBe(false)
      return { name, user: interpolate(e.NATS_USER!, env), pass: interpolate(e.NATS_PASS!, env) }
    })
    expect(logins.map((l) => l.user)).toEqual(COMPOSE_SERVICES.map((s) => `svc-${s}`))
    expect(new Set(logins.map((l) => l.pass)).size).toBe(COMPOSE_SERVICES.length)
    for (const { user } of logins) expect(config).toContain(`user: "${user}"`)

    // The generated configuration, in a real nats-server: each service's login is accepted, a wrong one is not.
    const server = await startNatsServer({ config })
    try {
      for (const { user, pass } of logins) {
        const nc = await connect({ servers: server.url, user, pass, reconnect: false })
        await nc.close()
      }
      await expect(
        connect({ servers: server.url, user: "svc-gateway", pass: "wrong", reconnect: false }),
      ).rejects.toThrow(/Authorization/i)
      await expect(connect({ servers: server.url, reconnect: false })).rejects.toThrow(/Authorization/i)
    } finally {
      await server.stop()
    }
  })

  it("runs NATS as a three-node JetStream cluster with the same configuration, and two replicas of every service on it", () => {
    const nodes = ["nats", "nats-2", "nats-3"]
    for (const name of nodes) {
      const command = source[name]!.command as string[]
      expect(command).toEqual(expect.arrayContaining(["-js", "-c", "/etc/nats/auth.conf", "--cluster_name", "wm"]))
      expect(command[command.indexOf("-n") + 1]).toBe(`wm-${name}`)
      expect(command[command.indexOf("--routes") + 1]!.split(",")).toEqual(nodes.map((n) => `nats://${n}:6222`))
      const mounts = (source[name]!.volumes as string[]).map((v) => interpolate(v, env))
      expect(mounts).toEqual([`${name}-data:/data`, `${join(dir, "nats-auth.conf")}:/etc/nats/auth.conf:ro`])
    }
    const built = services().filter(([, s]) => s.build !== undefined)
    for (const [name, s] of built) {
      const e = environmentOf(s)
      expect(e.NATS_URL, name).toBe(nodes.map((n) => `nats://${n}:4222`).join(","))
      expect(e.WM_STREAM_REPLICAS, name).toBe("3")
      // Every process builds event subjects with the same partition count.
      expect(interpolate(e.WM_PARTITIONS!, env), name).toBe("16")
    }
    const replicas = (name: string) => {
      const s = source[name]!
      return Number(((s.deploy ?? {}) as { replicas?: string }).replicas ?? "1")
    }
    for (const name of COMPOSE_SERVICES) expect(replicas(name), name).toBe(2)
  })

  it("requires QDRANT_API_KEY for Qdrant and for the service that reaches it", () => {
    const required = /^\$\{QDRANT_API_KEY:\?.+\}$/
    expect(environmentOf(source.qdrant!).QDRANT__SERVICE__API_KEY).toMatch(required)
    expect(environmentOf(source.memory!).QDRANT_API_KEY).toMatch(required)
    expect(env.get("QDRANT_API_KEY")!.length).toBeGreaterThanOrEqual(24)
    // The tenants reach the retrieval service, which scopes threads by them.
    expect(env.get("WM_TENANTS")).toBe("acme=planner,critic")
    expect(interpolate(environmentOf(source.memory!).WM_TENANTS!, env)).toBe("acme=planner,critic")
  })

  it("runs a Qdrant the client library supports: the same major version, minor versions at most one apart", () => {
    const image = String(source.qdrant!.image)
    const server = /^qdrant\/qdrant:v(\d+)\.(\d+)\.\d+$/.exec(image)
    expect(server, image).not.toBeNull()
    const client = JSON.parse(
      readFileSync(
        fileURLToPath(new URL("../../node_modules/@qdrant/js-client-rest/package.json", import.meta.url)),
        "utf8",
      ),
    ) as { version: string }
    const [major, minor] = client.version.split(".").map(Number)
    expect(Number(server![1])).toBe(major)
    expect(Math.abs(Number(server![2]) - minor!)).toBeLessThanOrEqual(1)
  })

  it("does not start without the generated settings", () => {
    expect(() => interpolateAll(source as unknown as Yaml, new Map())).toThrow(
      /required variable \w+ is missing a value: .*auth-config/,
    )
    expect(() => interpolateAll(source as unknown as Yaml, env)).not.toThrow()
  })
})
