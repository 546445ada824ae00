/**
 * The documentation against the code it describes: the operation table of docs/api.md lists exactly the
 * operations of contracts/api.ts, each once, with its subject and the service that serves it; and every
 * relative link of README.md, ARCHITECTURE.md and docs/*.md points to a file that exists (and, into a
 * markdown file, to a heading it has).
 */
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs"
import { dirname, join, relative } from "node:path"
import { describe, expect, it } from "vitest"
import { operations } from "../../contracts/api.ts"

const root = join(import.meta.dirname, "..", "..")
const read = (file: string) => readFileSync(join(root, file), "utf8")

interface OperationRow {
  readonly subject: string
  readonly operation: string
  readonly servedBy: string
}

const plain = (cell: string) => cell.replaceAll("`", "").trim()

/** The rows of the table whose header starts with `| subject suffix`. */
const operationRows = (markdown: string): OperationRow[] => {
  const lines = markdown.split("\n")
  const header = lines.findIndex((line) => line.startsWith("| subject suffix"))
  if (header < 0) throw new Error("no table with a 'subject suffix' column")
  const columns = lines[header]!.split("|").slice(1, -1).map(plain)
  const at = (name: string) => {
    const index = columns.indexOf(name)
    if (index < 0) throw new Error(`the operation table has no '${name}' column`)
    return index
  }
  const [subject, operation, servedBy] = [at("subject suffix"), at("operation"), at("served by")]
  const rows: OperationRow[] = []
  for (const line of lines.slice(header + 2)) {
    if (!line.startsWith("|")) break
    const cells = line.split("|").slice(1, -1).map(plain)
    rows.push({ subject: cells[subject] ?? "", operation: cells[operation] ?? "", servedBy: cells[servedBy] ?? "" })
  }
  return rows
}

/** What is wrong with a table against the declared operations: nothing when it lists each once, as declared. */
const tableProblems = (rows: ReadonlyArray<OperationRow>): string[] => {
  const declared = new Map<string, { readonly subject: string; readonly servedBy: string }>(Object.entries(operations))
  const problems: string[] = []
  const seen = new Map<string, number>()
  for (const row of rows) seen.set(row.operation, (seen.get(row.operation) ?? 0) + 1)
  for (const [name, count] of seen) if (count > 1) problems.push(`${name}: listed ${count} times`)
  for (const name of declared.keys()) if (!seen.has(name)) problems.push(`${name}: missing`)
  for (const row of rows) {
    const op = declared.get(row.operation)
    if (op === undefined) {
      problems.push(`${row.operation || row.subject}: not an operation of contracts/api.ts`)
      continue
    }
    if (row.subject !== op.subject) problems.push(`${row.operation}: subject ${row.subject}, declared ${op.subject}`)
    if (row.servedBy !== op.servedBy)
      problems.push(`${row.operation}: served by ${row.servedBy}, declared ${op.servedBy}`)
  }
  return problems
}

const markdownFiles = (): string[] => [
  "README.md",
  "ARCHITECTURE.md",
  ...readdirSync(join(root, "docs"))
    .filter((name) => name.endsWith(".md"))
    .map((name) => join("docs", name)),
]

/** Markdown without what is not prose: fenced code blocks and code spans. */
const prose = (markdown: string) => markdown.replace(/^```[\s\S]*?^```/gm, "").replace(/`[^`\n]*`/g, "")

/** The targets of the inline links and images of a markdown text. */
const linkTargets = (markdown: string): string[] =>
  [...prose(markdown).matchAll(/!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)].map((m) => m[1]!)

/** The anchors GitHub gives a markdown file's headings. */
const anchorsOf = (markdown: string): Set<string> => {
  const anchors = new Set<string>()
  const counts = new Map<string, number>()
  for (const line of markdown.replace(/^```[\s\S]*?^```/gm, "").split("\n")) {
    const heading = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line)
    if (heading === null) continue
    const slug = heading[1]!
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, "")
      .replace(/\s/g, "-")
    const n = counts.get(slug) ?? 0
    counts.set(slug, n + 1)
    anchors.add(n === 0 ? slug : `${slug}-${n}`)
  }
  return anchors
}

/** The relative links of one markdown file that lead nowhere: no such file, or no such heading in it. */
const brokenLinks = (
  file: string,
  markdown: string,
  exists: (path: string) => boolean,
  text: (path: string) => string,
) =>
  linkTargets(markdown).flatMap((target) => {
    if (/^[a-z][a-z0-9+.-]*:/i.test(target)) return [] // http:, https:, mailto:…
    const [path = "", anchor = ""] = target.split("#", 2)
    const hasHeading = (linked: string) =>
      anchor === "" || anchorsOf(linked).has(decodeURIComponent(anchor).toLowerCase())
    if (path === "") return hasHeading(markdown) ? [] : [`${file}: ${target} (no such heading)`]
    const resolved = join(dirname(file), decodeURIComponent(path))
    if (relative(".", resolved).startsWith("..")) return [`${file}: ${target} (outside the repository)`]
    if (!exists(resolved)) return [`${file}: ${target} (no such file)`]
    if (resolved.endsWith(".md") && !hasHeading(text(resolved))) return [`${file}: ${target} (no such heading)`]
    return []
  })

const inRepository = (path: string) => existsSync(join(root, path))
const textOf = (path: string) => (statSync(join(root, path)).isFile() ? read(path) : "")

describe("the operation table of docs/api.md", () => {
  it("lists every operation of contracts/api.ts once, with its subject and the service that serves it", () => {
    const rows = operationRows(read("docs/api.md"))
    expect(tableProblems(rows)).toEqual([])
    expect(rows.map((r) => r.operation).sort()).toEqual(Object.keys(operations).sort())
  })

  it("is found wanting when an operation is missing, listed twice, unknown or misdescribed", () => {
    const rows = Object.entries(operations).map(([operation, op]) => ({
      subject: op.subject,
      operation,
      servedBy: op.servedBy,
    }))
    expect(tableProblems(rows)).toEqual([])
    const [first, second, ...rest] = rows
    expect(tableProblems([second!, ...rest])).toEqual([`${first!.operation}: missing`])
    expect(tableProblems([first!, first!, second!, ...rest])).toEqual([`${first!.operation}: listed 2 times`])
    expect(tableProblems([...rows, { subject: "entry.erase", operation: "eraseEntry", servedBy: "gateway" }])).toEqual([
      "eraseEntry: not an operation of contracts/api.ts",
    ])
    expect(tableProblems([{ ...first!, servedBy: "working" }, second!, ...rest])).toEqual([
      `${first!.operation}: served by working, declared ${first!.servedBy}`,
    ])
  })
})

describe("the links of README.md, ARCHITECTURE.md and docs/", () => {
  it("lead to files that exist, and to headings those files have", () => {
    const files = markdownFiles()
    expect(files).toContain(join("docs", "api.md"))
    expect(files.flatMap((file) => brokenLinks(file, read(file), inRepository, textOf))).toEqual([])
  })

  it("are checked: a missing file, a missing heading and a link out of the repository are reported", () => {
    const markdown = [
      "[api](api.md#operations) [gone](gone.md) [nowhere](api.md#no-such-heading) [up](../../etc/passwd)",
      "[web](https://example.com/x.md) [here](#the-top) [there](#not-here) `[code](not-a-link.md)`",
      "# The top",
    ].join("\n")
    expect(brokenLinks(join("docs", "example.md"), markdown, inRepository, textOf)).toEqual([
      "docs/example.md: gone.md (no such file)",
      "docs/example.md: api.md#no-such-heading (no such heading)",
      "docs/example.md: ../../etc/passwd (outside the repository)",
      "docs/example.md: #not-here (no such heading)",
    ])
  })
})
