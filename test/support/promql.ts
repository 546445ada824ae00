/**
 * What a PromQL expression reads, from Prometheus' own grammar (@prometheus-io/lezer-promql): the metric names
 * its selectors query, the label names it matches or groups by, and where it does not parse.
 */
import { parser } from "@prometheus-io/lezer-promql"

export interface PromqlReads {
  readonly metrics: ReadonlyArray<string>
  readonly labels: ReadonlyArray<string>
  /** Offsets of the parts that are not PromQL; empty when the expression parses. */
  readonly errors: ReadonlyArray<number>
}

export const promqlReads = (expr: string): PromqlReads => {
  const metrics = new Set<string>()
  const labels = new Set<string>()
  const errors: number[] = []
  const text = (from: number, to: number) => expr.slice(from, to)
  parser.parse(expr).iterate({
    enter: (node) => {
      if (node.type.isError) errors.push(node.from)
      else if (node.name === "Identifier" && node.node.parent?.name === "VectorSelector")
        metrics.add(text(node.from, node.to))
      else if (node.name === "LabelName") labels.add(text(node.from, node.to))
    },
  })
  return { metrics: [...metrics], labels: [...labels], errors }
}
