/**
 * Reads docker-compose.yml for the deployment test, without a Docker engine: the YAML (with the failsafe
 * schema, so every scalar stays the string compose interpolates), then compose's variable interpolation
 * (`${VAR}`, `${VAR:-default}`, `${VAR-default}`, `${VAR:?message}`, `${VAR?message}`, `$$`) against an env file.
 */
import { parse } from "yaml"

export type Yaml = string | null | Yaml[] | { [key: string]: Yaml }

export const parseComposeYaml = (source: string): Yaml => parse(source, { schema: "failsafe" }) as Yaml

export const parseEnvFile = (text: string): Map<string, string> => {
  const env = new Map<string, string>()
  for (const raw of text.split("\n")) {
    const line = raw.trim()
    if (line === "" || line.startsWith("#")) continue
    const eq = line.indexOf("=")
    if (eq <= 0) throw new Error(`env file: '${line}' is not KEY=VALUE`)
    env.set(line.slice(0, eq), line.slice(eq + 1))
  }
  return env
}

/** Compose's interpolation of one string; a missing required variable throws with its message. */
export const interpolate = (text: string, env: ReadonlyMap<string, string>): string =>
  text.replace(
    /\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?)([-?])([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)/g,
    (whole, name, colon, op, arg, bare) => {
      if (whole === "$$") return "$"
      if (bare !== undefined) return env.get(bare) ?? ""
      const v = env.get(name as string)
      const missing = v === undefined || (colon === ":" && v === "")
      if (op === undefined) return v ?? ""
      if (op === "-") return missing ? (arg as string) : v!
      if (missing) throw new Error(`required variable ${name} is missing a value: ${arg}`)
      return v!
    },
  )

/** Every string of the document, interpolated. */
export const interpolateAll = (doc: Yaml, env: ReadonlyMap<string, string>): Yaml => {
  if (doc === null) return null
  if (typeof doc === "string") return interpolate(doc, env)
  if (Array.isArray(doc)) return doc.map((d) => interpolateAll(d, env))
  return Object.fromEntries(Object.entries(doc).map(([k, v]) => [k, interpolateAll(v, env)]))
}
