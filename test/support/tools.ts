/**
 * The pinned tools the deployment tests run (infra/tools.ts): the copy a setting names (WM_PROMTOOL,
 * WM_HELM, WM_KUBECONFORM, WM_KUBE_SCHEMAS), else the one `npm run tools:fetch` set up. A tool found in
 * neither place fails the test that asks for it, saying how to set it up; nothing is skipped.
 */
import { existsSync } from "node:fs"
import { Option } from "effect"
import { readSetting, type Setting, settings } from "../../contracts/settings.ts"
import { GO_TOOLS, type GoTool, goToolPath, KUBE_SCHEMAS, kubeSchemasPath } from "../../infra/tools.ts"

const located = (setting: Setting<Option.Option<string>>, fallback: string, what: string): string => {
  const path = Option.getOrElse(readSetting(setting), () => fallback)
  if (!existsSync(path))
    throw new Error(`${what} not found at ${path}: run \`npm run tools:fetch\` (or set ${setting.name} to a copy)`)
  return path
}

const tool = (name: GoTool["name"]): string => {
  const spec = GO_TOOLS.find((t) => t.name === name)!
  return located(settings[spec.setting], goToolPath(spec), `${name} ${spec.version}`)
}

export const promtool = (): string => tool("promtool")
export const helm = (): string => tool("helm")
export const kubeconform = (): string => tool("kubeconform")

/** The directory of Kubernetes' strict JSON schemas, one file per kind and API version. */
export const kubeSchemas = (): string =>
  located(
    settings[KUBE_SCHEMAS.setting],
    kubeSchemasPath(),
    `Kubernetes ${KUBE_SCHEMAS.kubernetesVersion} JSON schemas`,
  )

/** kubeconform's arguments for strict validation against those schemas, offline. */
export const kubeconformArgs = (): ReadonlyArray<string> => [
  "-strict",
  "-summary",
  "-output",
  "json",
  "-schema-location",
  `${kubeSchemas()}/{{ .ResourceKind }}{{ .KindSuffix }}.json`,
]
