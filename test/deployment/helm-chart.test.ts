/**
 * The Helm chart (infra/helm/working-memory), rendered by the pinned helm and validated by kubeconform against
 * Kubernetes' strict JSON schemas, offline (test/support/tools.ts). The NATS and Qdrant charts it depends on
 * cannot be fetched here, and helm renders nothing while a declared dependency is missing, so our templates are
 * rendered from a copy of the chart without its dependency list: every document of ours is checked, none of
 * theirs (docs/kubernetes.md, "What CI validates").
 */
import { spawnSync } from "node:child_process"
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { parse, parseAllDocuments, stringify } from "yaml"
import { settings } from "../../contracts/settings.ts"
import { helm, kubeconform, kubeconformArgs } from "../support/tools.ts"

const REPO = join(import.meta.dirname, "..", "..")
const CHART = join(REPO, "infra", "helm", "working-memory")
const NODE = join(REPO, "node_modules", ".bin", "node")
const SERVICES = ["gateway", "working", "memory", "substrate", "fade", "dashboard"]
/** The PodMonitor is a Prometheus Operator resource: no schema of it in Kubernetes' own. */
const NO_SCHEMA = ["PodMonitor"]

type Doc = { kind: string; metadata: { name: string }; [key: string]: unknown }
type EnvVar = { name: string; value?: string; valueFrom?: { secretKeyRef?: { name: string; key: string } } }
type Container = {
  name: string
  command: string[]
  ports: { name: string; containerPort: number }[]
  env: EnvVar[]
  livenessProbe: { httpGet: { path: string; port: string } }
  readinessProbe: { httpGet: { path: string; port: string } }
}
type Deployment = Doc & {
  spec: {
    replicas: number
    selector: { matchLabels: Record<string, string> }
    template: { metadata: { labels: Record<string, string> }; spec: { containers: Container[] } }
  }
}

let dir: string
let chart: string
let credentialsFile: string
let credentials: { services: Record<string, { user: string; pass: string }> }

const run = (command: string, args: ReadonlyArray<string>, input?: string) => {
  const result = spawnSync(command, args, { encoding: "utf8", input, maxBuffer: 64 * 1024 * 1024 })
  if (result.error) throw result.error
  return result
}

/** `helm template` of our templates; throws with helm's message when it refuses. */
const render = (...args: string[]): Doc[] => {
  const result = run(helm(), ["template", "wm", chart, ...args])
  if (result.status !== 0) throw new Error(result.stderr)
  return parseAllDocuments(result.stdout)
    .map((d) => d.toJS() as Doc | null)
    .filter((d): d is Doc => d !== null)
}
/** Three replicas each, with an existing NATS and Qdrant (the chart may then create the Qdrant key's Secret). */
const FLEET_VALUES = ["-f", join(CHART, "ci", "fleet-values.yaml")]
const FLEET = [...FLEET_VALUES, "--set", "auth.qdrant.apiKey=qdrant-key-from-values"]
const WITH_CREDENTIALS = (): string[] => ["--set-file", `auth.nats.credentialsJson=${credentialsFile}`]

const deployments = (docs: Doc[]) => docs.filter((d): d is Deployment => d.kind === "Deployment")
const containerOf = (d: Deployment) => d.spec.template.spec.containers[0]!
const envOf = (d: Deployment) => new Map(containerOf(d).env.map((e) => [e.name, e]))

/** kubeconform's summary of validating these documents strictly against the offline schemas. */
const validate = (docs: ReadonlyArray<unknown>, skip: ReadonlyArray<string> = []) => {
  const input = docs.map((d) => stringify(d)).join("---\n")
  const result = run(kubeconform(), [...kubeconformArgs(), ...(skip.length ? ["-skip", skip.join(",")] : [])], input)
  const report = JSON.parse(result.stdout) as {
    resources: { kind: string; name: string; status: string; msg: string }[]
    summary: { valid: number; invalid: number; errors: number; skipped: number }
  }
  return { status: result.status, ...report }
}

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "wm-helm-"))
  chart = join(dir, "working-memory")
  cpSync(CHART, chart, { recursive: true })
  const chartYaml = parse(readFileSync(join(chart, "Chart.yaml"), "utf8")) as Record<string, unknown>
  delete chartYaml.dependencies
  writeFileSync(join(chart, "Chart.yaml"), stringify(chartYaml))
  credentialsFile = join(dir, "credentials.json")
  const generated = run(NODE, [
    join(REPO, "cli", "wm.ts"),
    "auth-config",
    "--agent",
    "planner",
    "--credentials",
    credentialsFile,
    "--out",
    join(dir, "nats-auth.conf"),
  ])
  expect(generated.status, generated.stderr).toBe(0)
  credentials = JSON.parse(readFileSync(credentialsFile, "utf8"))
})
afterAll(() => rmSync(dir, { recursive: true, force: true }))

describe("the Helm chart", () => {
  it("depends on the NATS chart (JetStream, three nodes) and Qdrant's, each behind a condition, and helm says only that they are missing here", () => {
    const meta = parse(readFileSync(join(CHART, "Chart.yaml"), "utf8")) as {
      dependencies: { name: string; repository: string; condition: string }[]
    }
    expect(meta.dependencies.map(({ name, repository, condition }) => ({ name, repository, condition }))).toEqual([
      { name: "nats", repository: "https://nats-io.github.io/k8s/helm/charts/", condition: "nats.enabled" },
      { name: "qdrant", repository: "https://qdrant.github.io/qdrant-helm", condition: "qdrant.enabled" },
    ])
    const values = parse(readFileSync(join(CHART, "values.yaml"), "utf8"))
    expect(values.nats.config.jetstream.enabled).toBe(true)
    expect(values.nats.config.cluster).toMatchObject({ enabled: true, replicas: 3 })
    // The bundled Qdrant requires the key the memory service sends.
    expect(values.qdrant.apiKey.valueFrom.secretKeyRef).toEqual({ name: values.auth.qdrant.secretName, key: "api-key" })

    const lint = run(helm(), ["lint", CHART])
    expect(lint.status, lint.stdout + lint.stderr).toBe(0)
    const warnings = lint.stdout.split("\n").filter((l) => /^\[(WARNING|ERROR)\]/.test(l))
    expect(warnings).toEqual([`[WARNING] ${CHART}: chart directory is missing these dependencies: nats,qdrant`])
  })

  it.each([
    ["default", []],
    ["fleet", FLEET],
  ])("passes helm lint --strict on its templates with the %s values", (_, values) => {
    const lint = run(helm(), ["lint", "--strict", chart, ...values, ...WITH_CREDENTIALS()])
    expect(lint.status, lint.stdout + lint.stderr).toBe(0)
  })

  it.each([
    ["default", []],
    ["fleet", FLEET],
  ])("renders with the %s values documents kubeconform finds valid against Kubernetes' strict schemas", (_, values) => {
    const docs = render(...values, ...WITH_CREDENTIALS())
    const report = validate(docs, NO_SCHEMA)
    const checked = docs.filter((d) => !NO_SCHEMA.includes(d.kind))
    expect(
      report.resources.filter((r) => r.status !== "statusValid"),
      JSON.stringify(report),
    ).toEqual([])
    expect(report.summary).toEqual({
      valid: checked.length,
      invalid: 0,
      errors: 0,
      skipped: docs.length - checked.length,
    })
    expect(report.status).toBe(0)
    expect(deployments(docs)).toHaveLength(SERVICES.length)
  })

  it("is validated for real: kubeconform refuses a Deployment with a field Kubernetes does not have", () => {
    const [gateway] = deployments(render()).filter((d) => d.metadata.name === "wm-gateway")
    const broken = structuredClone(gateway!)
    ;(containerOf(broken) as unknown as Record<string, unknown>).livenessProbes = containerOf(broken).livenessProbe
    const report = validate([broken])
    expect(report.summary).toMatchObject({ valid: 0, invalid: 1 })
    expect(report.resources[0]!.msg).toContain("livenessProbes")
  })

  it.each([
    ["default", [], { gateway: 2, working: 2, memory: 2, substrate: 2, fade: 2, dashboard: 1 }],
    ["fleet", FLEET, { gateway: 3, working: 3, memory: 3, substrate: 3, fade: 3, dashboard: 3 }],
  ])(
    "runs each service with the %s replicas, live on /healthz and ready on /readyz of its metrics port",
    (_, values, replicas) => {
      const docs = deployments(render(...values))
      expect(Object.fromEntries(docs.map((d) => [d.metadata.name, d.spec.replicas]))).toEqual(
        Object.fromEntries(Object.entries(replicas).map(([s, n]) => [`wm-${s}`, n])),
      )
      for (const d of docs) {
        const service = d.metadata.name.replace(/^wm-/, "")
        const container = containerOf(d)
        const env = envOf(d)
        expect(container.command).toEqual(["node", `services/${service}/main.ts`])
        expect(existsSync(join(REPO, "services", service, "main.ts"))).toBe(true)
        const metrics = container.ports.find((p) => p.name === "metrics")
        expect(metrics, d.metadata.name).toBeDefined()
        expect(env.get("WM_METRICS_PORT")?.value).toBe(String(metrics!.containerPort))
        expect(env.get("WM_METRICS_HOST")?.value).toBe("0.0.0.0")
        expect(container.livenessProbe.httpGet).toEqual({ path: "/healthz", port: "metrics" })
        expect(container.readinessProbe.httpGet).toEqual({ path: "/readyz", port: "metrics" })
      }
    },
  )

  it("sets only variables the services declare", () => {
    const declared = new Set(Object.keys(settings))
    const set = [render(), render(...FLEET)].flatMap(deployments).flatMap((d) => containerOf(d).env.map((e) => e.name))
    expect(set.length).toBeGreaterThan(0)
    expect([...new Set(set)].filter((name) => !declared.has(name))).toEqual([])
  })

  it("logs each service in to NATS as its own user of the credentials auth-config writes, the dashboard as audit", () => {
    const docs = render(...WITH_CREDENTIALS())
    const secret = docs.find((d) => d.kind === "Secret" && d.metadata.name === "wm-nats-credentials") as
      | (Doc & { data: Record<string, string> })
      | undefined
    expect(secret).toBeDefined()
    const decoded = (key: string) => Buffer.from(secret!.data[key]!, "base64").toString("utf8")
    for (const d of deployments(docs)) {
      const service = d.metadata.name.replace(/^wm-/, "")
      const env = envOf(d)
      const user = env.get("NATS_USER")?.valueFrom?.secretKeyRef
      const pass = env.get("NATS_PASS")?.valueFrom?.secretKeyRef
      expect(user).toEqual({ name: "wm-nats-credentials", key: `${service}-user` })
      expect(pass).toEqual({ name: "wm-nats-credentials", key: `${service}-pass` })
      const login = credentials.services[service === "dashboard" ? "audit" : service]!
      expect({ user: decoded(user!.key), pass: decoded(pass!.key) }).toEqual(login)
    }
  })

  it("renders no Secret and no secret value when given existing Secret names; secrets from values appear only encoded", () => {
    const secretSettings = new Set(
      Object.values(settings)
        .filter((s) => s.type === "secret")
        .map((s) => s.name),
    )
    const existing = render(
      ...FLEET_VALUES,
      "--set",
      "auth.nats.secretName=ops-nats",
      "--set",
      "auth.qdrant.secretName=ops-q",
      "--set",
      "auth.contentKeys.secretName=ops-keys",
    )
    expect(existing.filter((d) => d.kind === "Secret")).toEqual([])
    const secretEnv = deployments(existing).flatMap((d) => containerOf(d).env.filter((e) => secretSettings.has(e.name)))
    expect(secretEnv.map((e) => e.name).sort()).toEqual(
      expect.arrayContaining(["NATS_PASS", "QDRANT_API_KEY", "WM_KEY_ENCRYPTION_KEYS"]),
    )
    // Every service opens the content keys with the same key-encryption keys.
    for (const d of deployments(existing))
      expect(envOf(d).get("WM_KEY_ENCRYPTION_KEYS")?.valueFrom?.secretKeyRef?.name, d.metadata.name).toBe("ops-keys")
    for (const e of secretEnv) {
      expect(e.value, e.name).toBeUndefined()
      expect(e.valueFrom?.secretKeyRef?.name, e.name).toMatch(/^(ops-nats|ops-q|ops-keys|embedder)$/)
    }

    const kek = `k1:${Buffer.alloc(32, 7).toString("base64")}`
    const rendered = run(helm(), [
      "template",
      "wm",
      chart,
      ...FLEET,
      ...WITH_CREDENTIALS(),
      "--set-string",
      `auth.contentKeys.keyEncryptionKeys=${kek}`,
    ]).stdout
    expect(rendered).toContain(Buffer.from("qdrant-key-from-values").toString("base64"))
    expect(rendered).toContain(Buffer.from(kek).toString("base64"))
    const plaintext = [...Object.values(credentials.services).map((c) => c.pass), "qdrant-key-from-values", kek]
    expect(plaintext.filter((p) => rendered.includes(p))).toEqual([])
  })

  it("refuses to create the Qdrant key's Secret for the bundled Qdrant, whose chart reads it before the install", () => {
    expect(() => render("--set", "qdrant.enabled=true", "--set", "auth.qdrant.apiKey=k")).toThrow(
      /auth.qdrant.apiKey cannot be used with the bundled Qdrant/,
    )
  })

  it("documents every value in the table of docs/kubernetes.md, and no value it does not have", () => {
    const values = parse(readFileSync(join(CHART, "values.yaml"), "utf8")) as Record<string, unknown>
    /** The dotted path of each value that is not a map of further values. */
    const leaves = (node: unknown, path: string): string[] =>
      node !== null && typeof node === "object" && !Array.isArray(node) && Object.keys(node).length > 0
        ? Object.entries(node).flatMap(([k, v]) => leaves(v, path ? `${path}.${k}` : k))
        : [path]
    const documented = readFileSync(join(REPO, "docs", "kubernetes.md"), "utf8")
      .split("\n")
      .filter((line) => line.startsWith("| `"))
      .flatMap((line) => [...line.split("|")[1]!.matchAll(/`([^`]+)`/g)].map((m) => m[1]!))
    // A row names a value or a map of them; `<service>` stands for any service.
    const covers = (row: string, leaf: string) =>
      new RegExp(`^${row.replaceAll(".", "\\.").replace("<service>", "[^.]+")}(\\.|$)`).test(leaf)
    const all = leaves(values, "")
    expect(all.filter((leaf) => !documented.some((row) => covers(row, leaf)))).toEqual([])
    expect(documented.filter((row) => !all.some((leaf) => covers(row, leaf)))).toEqual([])
  })

  it("refuses a secret setting given as a plain value", () => {
    expect(() => render("--set", "config.WM_SUMMARIZER_API_KEY=sk-plain")).toThrow(/WM_SUMMARIZER_API_KEY is a secret/)
  })

  it("serves the dashboard through its Service, and the PodMonitor scrapes every service's metrics port", () => {
    const docs = render(...FLEET)
    const service = docs.find((d) => d.kind === "Service") as Doc & {
      spec: { selector: Record<string, string>; ports: { targetPort: string }[] }
    }
    const dashboard = deployments(docs).find((d) => d.metadata.name === "wm-dashboard")!
    expect(dashboard.spec.template.metadata.labels).toMatchObject(service.spec.selector)
    expect(containerOf(dashboard).ports.map((p) => p.name)).toContain(service.spec.ports[0]!.targetPort)

    const monitor = docs.find((d) => d.kind === "PodMonitor") as Doc & {
      spec: { selector: { matchLabels: Record<string, string> }; podMetricsEndpoints: { port: string }[] }
    }
    expect(monitor.spec.podMetricsEndpoints.map((e) => e.port)).toEqual(["metrics"])
    const scraped = deployments(docs).filter((d) =>
      Object.entries(monitor.spec.selector.matchLabels).every(([k, v]) => d.spec.template.metadata.labels[k] === v),
    )
    expect(scraped.map((d) => d.metadata.name).sort()).toEqual(SERVICES.map((s) => `wm-${s}`).sort())
  })
})
