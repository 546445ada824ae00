/**
 * The Grafana dashboard (infra/grafana/working-memory.json) and the alert rules (infra/prometheus/alerts.yaml)
 * query only the metrics contracts/metrics.ts declares, by the labels declared for them. The rules are checked
 * and unit-tested by the pinned promtool (`promtool check rules`, `promtool test rules` on
 * infra/prometheus/alerts.test.yaml); every expression is parsed with Prometheus' PromQL grammar.
 */
import { spawnSync } from "node:child_process"
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { parse } from "yaml"
import { type MetricDeclaration, metrics, seriesNames } from "../../contracts/metrics.ts"
import { promqlReads } from "../support/promql.ts"
import { promtool } from "../support/tools.ts"

const REPO = join(import.meta.dirname, "..", "..")
const RULES = join(REPO, "infra", "prometheus", "alerts.yaml")
const RULE_TESTS = join(REPO, "infra", "prometheus", "alerts.test.yaml")
const DASHBOARD = join(REPO, "infra", "grafana", "working-memory.json")

/** Each series a scrape shows (a histogram's _bucket, _sum and _count) → the metric it belongs to. */
const declaredSeries = new Map<string, MetricDeclaration>(
  Object.values(metrics).flatMap((m) => seriesNames(m).map((s) => [s, m] as const)),
)
// biome-ignore lint/suspicious/noTemplateCurlyInString: Grafana's syntax for a variable, in a plain string
const DATASOURCE = "${datasource}"
/** Labels Prometheus adds to every series it scrapes. */
const TARGET_LABELS = ["instance", "job"]

/** What is wrong with an expression: PromQL that does not parse, undeclared metrics, labels none of its metrics has. */
const problems = (expr: string): string[] => {
  const reads = promqlReads(expr)
  const found: string[] = reads.errors.map((at) => `not PromQL at ${at}: ${expr.slice(at, at + 20)}`)
  const read = reads.metrics.map((s) => declaredSeries.get(s))
  reads.metrics.forEach((s, i) => {
    if (read[i] === undefined) found.push(`undeclared metric ${s}`)
  })
  const histogram = read.some((m) => m?.kind === "histogram")
  const known = new Set([...TARGET_LABELS, ...(histogram ? ["le"] : []), ...read.flatMap((m) => m?.labels ?? [])])
  for (const label of reads.labels) if (!known.has(label)) found.push(`label ${label} is not one of ${[...known]}`)
  if (reads.metrics.length === 0) found.push("queries no metric")
  return found
}

type Rule = { alert: string; expr: string; for?: string; labels: { severity: string } }
const rules = (): Rule[] =>
  (parse(readFileSync(RULES, "utf8")) as { groups: { rules: Rule[] }[] }).groups.flatMap((g) => g.rules)

type Target = { expr: string; datasource: { uid: string } }
type Panel = { type: string; title: string; datasource?: { uid: string }; targets?: Target[] }
type Dashboard = {
  panels: Panel[]
  templating: { list: { name: string; type: string; query: string | { query: string } }[] }
}
const dashboard = (): Dashboard => JSON.parse(readFileSync(DASHBOARD, "utf8"))
const queryPanels = () => dashboard().panels.filter((p) => p.type !== "row")

/** Grafana's variables in a panel's expression, replaced by what they stand for, so the expression is PromQL. */
const asPromql = (expr: string) =>
  expr.replaceAll("$__rate_interval", "5m").replaceAll("$__interval", "1m").replaceAll("$service", ".*")

describe("the alert rules", () => {
  it("pass promtool check rules", () => {
    const check = spawnSync(promtool(), ["check", "rules", RULES], { encoding: "utf8" })
    expect(check.status, check.stdout + check.stderr).toBe(0)
    expect(check.stdout).toContain(`SUCCESS: ${rules().length} rules found`)
  })

  it("fire on the series that should raise them, and only after their `for` (promtool test rules)", () => {
    const test = spawnSync(promtool(), ["test", "rules", RULE_TESTS], { encoding: "utf8" })
    expect(test.status, test.stdout + test.stderr).toBe(0)
  })

  it("watch lag, request errors, partitions without owner, NATS connections and long-term writes", () => {
    const watched = new Set(rules().flatMap((r) => promqlReads(r.expr).metrics))
    for (const m of [
      metrics.projectionLag,
      metrics.requestDuration,
      metrics.partitionsWithoutOwner,
      metrics.natsConnected,
      metrics.longtermWrites,
    ])
      expect(
        seriesNames(m).some((s) => watched.has(s)),
        m.name,
      ).toBe(true)
  })

  it("query only declared metrics, by their declared labels", () => {
    expect(Object.fromEntries(rules().map((r) => [r.alert, problems(r.expr)]))).toEqual(
      Object.fromEntries(rules().map((r) => [r.alert, []])),
    )
  })
})

describe("the Grafana dashboard", () => {
  it("takes its data source as a variable, in every panel and query", () => {
    const board = dashboard()
    expect(board.templating.list.find((v) => v.name === "datasource")).toMatchObject({
      type: "datasource",
      query: "prometheus",
    })
    for (const panel of queryPanels()) {
      expect(panel.datasource?.uid, panel.title).toBe(DATASOURCE)
      for (const target of panel.targets ?? []) expect(target.datasource.uid, panel.title).toBe(DATASOURCE)
    }
  })

  it("has a query in every panel", () => {
    const empty = queryPanels()
      .filter((p) => (p.targets ?? []).filter((t) => t.expr.trim() !== "").length === 0)
      .map((p) => p.title)
    expect(queryPanels().length).toBeGreaterThan(0)
    expect(empty).toEqual([])
  })

  it("queries only declared metrics, by their declared labels, in its panels and its variables", () => {
    const exprs = [
      ...queryPanels().flatMap((p) => (p.targets ?? []).map((t) => [p.title, t.expr] as const)),
      ...dashboard().templating.list.flatMap((v) => {
        const query = typeof v.query === "string" ? v.query : v.query.query
        // label_values(<selector>, <label>): the selector is PromQL, the label one of its metric's.
        const m = /^label_values\((.+),\s*(\w+)\)$/.exec(query)
        return m ? [[`variable ${v.name}`, `sum by (${m[2]}) (${m[1]})`] as const] : []
      }),
    ]
    const found = exprs.map(([where, expr]) => [where, problems(asPromql(expr))] as const).filter(([, p]) => p.length)
    expect(found).toEqual([])
  })

  it("shows requests and their latency, lag, owners, queues, long-term writes and NATS connections", () => {
    const shown = new Set(
      queryPanels().flatMap((p) => (p.targets ?? []).flatMap((t) => promqlReads(asPromql(t.expr)).metrics)),
    )
    for (const series of [
      "wm_request_duration_seconds_count",
      "wm_request_duration_seconds_bucket",
      "wm_projection_lag_events",
      "wm_partitions_without_owner",
      "wm_background_queue_depth",
      "wm_longterm_writes_total",
      "wm_nats_connected",
    ])
      expect(shown.has(series), series).toBe(true)
  })
})
