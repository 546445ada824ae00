/**
 * Reads docker-compose.yml for the deployment test, without a Docker engine or a YAML library: a parser for
 * the part of YAML the file uses — block mappings, block sequences of scalars, flow sequences of scalars,
 * plain, double-quoted and single-quoted scalars, comments — that throws on anything else (anchors, aliases,
 * merge keys, flow mappings, multi-line scalars, tabs), so it never silently reads the file differently
 * from Docker. Then compose's variable interpolation (`${VAR}`, `${VAR:-default}`, `${VAR-default}`,
 * `${VAR:?message}`, `${VAR?message}`, `$$`) against an env file.
 */
export type Yaml = string | null | Yaml[] | { [key: string]: Yaml }

interface Line {
  readonly no: number
  readonly indent: number
  readonly text: string
}

const unsupported = (line: Line, what: string): never => {
  throw new Error(`docker-compose.yml line ${line.no}: ${what} is not supported by this reader`)
}

/** The line without its comment (a `#` at the start or after a space, outside quotes). */
const stripComment = (text: string): string => {
  let quote: string | null = null
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!
    if (quote !== null) {
      if (c === "\\" && quote === '"') i++
      else if (c === quote) quote = null
    } else if (c === '"' || c === "'") quote = c
    else if (c === "#" && (i === 0 || text[i - 1] === " ")) return text.slice(0, i)
  }
  return text
}

const scalar = (raw: string, line: Line): string | null => {
  const text = raw.trim()
  if (text === "" || text === "~" || text === "null") return null
  if (text.startsWith('"')) {
    if (!text.endsWith('"') || text.length < 2) unsupported(line, "an unterminated string")
    return JSON.parse(text) as string
  }
  if (text.startsWith("'")) {
    if (!text.endsWith("'") || text.length < 2) unsupported(line, "an unterminated string")
    return text.slice(1, -1).replaceAll("''", "'")
  }
  if (/^[&*!|>{]/.test(text) || text === "<<") unsupported(line, `'${text[0]}'`)
  if (text.startsWith("[")) unsupported(line, "a nested flow sequence")
  return text
}

/** `[a, "b", 'c']`: scalars only. */
const flowSequence = (raw: string, line: Line): string[] => {
  const inner = raw.trim().slice(1, -1)
  const items: string[] = []
  let current = ""
  let quote: string | null = null
  for (let i = 0; i < inner.length; i++) {
    const c = inner[i]!
    if (quote !== null) {
      current += c
      if (c === "\\" && quote === '"') current += inner[++i] ?? ""
      else if (c === quote) quote = null
    } else if (c === '"' || c === "'") {
      quote = c
      current += c
    } else if (c === ",") {
      items.push(current)
      current = ""
    } else if (c === "[" || c === "{") unsupported(line, "a nested flow collection")
    else current += c
  }
  if (quote !== null) unsupported(line, "an unterminated string")
  if (current.trim() !== "") items.push(current)
  return items.map((item) => {
    const value = scalar(item, line)
    if (value === null) unsupported(line, "an empty flow item")
    return value!
  })
}

const value = (raw: string, line: Line): Yaml => {
  const text = raw.trim()
  if (text.startsWith("[")) {
    if (!text.endsWith("]")) unsupported(line, "a multi-line flow sequence")
    return flowSequence(text, line)
  }
  return scalar(text, line)
}

/** The key of `key: value` or `key:` (plain or quoted), and the rest. */
const splitKey = (text: string, line: Line): [string, string] | undefined => {
  const quoted = /^("(?:[^"\\]|\\.)*"|'(?:[^']|'')*')\s*:(\s|$)/.exec(text)
  if (quoted) return [scalar(quoted[1]!, line)!, text.slice(quoted[0].length)]
  const plain = /^([^\s"'#[\]{},&*!|>][^:#]*?)\s*:(\s|$)/.exec(text)
  if (plain) {
    if (plain[1] === "<<") unsupported(line, "a merge key")
    return [plain[1]!, text.slice(plain[0].length)]
  }
  return undefined
}

export const parseComposeYaml = (source: string): Yaml => {
  const lines: Line[] = []
  source.split("\n").forEach((raw, i) => {
    const line = { no: i + 1, indent: 0, text: "" }
    if (/^\s*\t/.test(raw)) unsupported(line, "a tab in the indentation")
    const text = stripComment(raw).trimEnd()
    if (text.trim() === "") return
    if (text.trim() === "---" || text.trim() === "...") unsupported(line, "a document marker")
    lines.push({ no: i + 1, indent: text.length - text.trimStart().length, text: text.trim() })
  })
  let at = 0

  const block = (indent: number): Yaml => {
    const first = lines[at]!
    if (first.text.startsWith("- ") || first.text === "-") {
      const items: Yaml[] = []
      while (at < lines.length && lines[at]!.indent === indent && lines[at]!.text.startsWith("-")) {
        const line = lines[at]!
        const rest = line.text.slice(1).trim()
        if (rest === "" || splitKey(rest, line) !== undefined)
          unsupported(line, "a sequence of mappings or nested sequences")
        items.push(value(rest, line))
        at++
      }
      return items
    }
    const map: { [key: string]: Yaml } = {}
    while (at < lines.length && lines[at]!.indent === indent) {
      const line = lines[at]!
      const split = splitKey(line.text, line)
      if (split === undefined) unsupported(line, `'${line.text}' where a key was expected`)
      const [key, rest] = split!
      if (key in map) throw new Error(`docker-compose.yml line ${line.no}: duplicate key '${key}'`)
      at++
      if (rest.trim() !== "") map[key] = value(rest, line)
      else if (at < lines.length && lines[at]!.indent > indent) map[key] = block(lines[at]!.indent)
      else if (at < lines.length && lines[at]!.indent === indent && lines[at]!.text.startsWith("-"))
        map[key] = block(indent)
      else map[key] = null
    }
    if (at < lines.length && lines[at]!.indent > indent) unsupported(lines[at]!, "an indentation that matches no key")
    return map
  }

  const doc = lines.length === 0 ? null : block(lines[0]!.indent)
  if (at < lines.length) unsupported(lines[at]!, "text after the document")
  return doc
}

/** `KEY=VALUE` lines, as docker compose reads `.env` (comments and blank lines skipped). */
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
