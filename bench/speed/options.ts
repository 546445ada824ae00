/** The command line of `npm run bench:speed`, read and checked. */
import { parseArgs } from "node:util"
import { SERVICES_MODES, type ServicesMode } from "./ingest.ts"
import { FIGURES_OF_PHASE, SPEED_PHASES, type SpeedOptions, type SpeedPhase } from "./run.ts"
import { STEP_LONG_TERMS, type StepLongTerm } from "./steps.ts"

/** The steps phase's flags are its options (SpeedOptions), named alike. */
export interface SpeedArgs extends Pick<SpeedOptions, "stepAgents" | "stepSeconds" | "stepEmbedders" | "stepLongTerm"> {
  readonly out?: string
  readonly quick: boolean
  readonly rounds?: number
  readonly services: ServicesMode
  readonly phases?: ReadonlyArray<SpeedPhase>
  readonly records?: number
  readonly profile?: string
}

const positiveInteger = (flag: string, text: string | undefined): number | undefined => {
  if (text === undefined) return undefined
  const n = Number(text)
  if (!(Number.isInteger(n) && n > 0)) throw new Error(`${flag} must be a positive integer`)
  return n
}

const list = (text: string | undefined): string[] | undefined =>
  text
    ?.split(",")
    .map((p) => p.trim())
    .filter((p) => p.length > 0)

export const parseSpeedArgs = (args: ReadonlyArray<string>): SpeedArgs => {
  const { values } = parseArgs({
    args: [...args],
    options: {
      out: { type: "string" },
      quick: { type: "boolean", default: false },
      rounds: { type: "string" },
      services: { type: "string", default: "processes" },
      only: { type: "string" },
      records: { type: "string" },
      profile: { type: "string" },
      "step-agents": { type: "string" },
      "step-seconds": { type: "string" },
      "step-embedders": { type: "string" },
      "step-longterm": { type: "string" },
    },
  })
  const services = values.services as ServicesMode
  if (!SERVICES_MODES.includes(services)) throw new Error(`--services must be one of ${SERVICES_MODES.join(", ")}`)
  const phases = list(values.only) as SpeedPhase[] | undefined
  if (phases !== undefined && phases.length === 0) throw new Error(`--only takes some of ${SPEED_PHASES.join(", ")}`)
  for (const p of phases ?? [])
    if (!SPEED_PHASES.includes(p)) throw new Error(`--only takes some of ${SPEED_PHASES.join(", ")}`)
  const stepAgents = list(values["step-agents"])?.map((n) => positiveInteger("--step-agents", n)!)
  if (stepAgents !== undefined && stepAgents.length === 0)
    throw new Error("--step-agents takes agent counts, e.g. 1,10,100")
  const stepEmbedders = list(values["step-embedders"])
  if (stepEmbedders !== undefined && stepEmbedders.length === 0)
    throw new Error("--step-embedders takes WM_EMBEDDER names, e.g. minilm,offline")
  const stepLongTerm = values["step-longterm"] as StepLongTerm | undefined
  if (stepLongTerm !== undefined && !STEP_LONG_TERMS.includes(stepLongTerm))
    throw new Error(`--step-longterm must be one of ${STEP_LONG_TERMS.join(", ")}`)
  const rounds = positiveInteger("--rounds", values.rounds)
  const records = positiveInteger("--records", values.records)
  const stepSeconds = positiveInteger("--step-seconds", values["step-seconds"])
  return {
    quick: values.quick ?? false,
    services,
    ...(values.out !== undefined ? { out: values.out } : {}),
    ...(rounds !== undefined ? { rounds } : {}),
    ...(phases !== undefined ? { phases } : {}),
    ...(records !== undefined ? { records } : {}),
    ...(values.profile !== undefined ? { profile: values.profile } : {}),
    ...(stepAgents !== undefined ? { stepAgents } : {}),
    ...(stepSeconds !== undefined ? { stepSeconds } : {}),
    ...(stepEmbedders !== undefined ? { stepEmbedders } : {}),
    ...(stepLongTerm !== undefined ? { stepLongTerm } : {}),
  }
}

/**
 * What `--out` is given after a run of only some phases: the figures already in the file but those of
 * the phases that ran, and the new figures.
 */
export const mergeFigures = (
  existing: Readonly<Record<string, unknown>> | undefined,
  fresh: Readonly<Record<string, unknown>>,
  ran: ReadonlyArray<SpeedPhase>,
): Record<string, unknown> => {
  const replaced = new Set<string>(ran.flatMap((phase) => FIGURES_OF_PHASE[phase]))
  const kept = Object.entries(existing ?? {}).filter(([key]) => !replaced.has(key))
  return { ...Object.fromEntries(kept), ...fresh }
}
