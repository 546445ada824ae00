/**
 * The tools an assistant gets over MCP, each one API operation of its agent. Their input schemas are
 * the API's own JSON Schemas (contracts/json-schema.ts), less what the server supplies for the
 * session: `afterSeq` (the SDK reads its own writes) and, where a step is named, the step begun in
 * this session (so `stepId` becomes optional there).
 */
import type { OperationName } from "../contracts/api.ts"
import { apiJsonSchema } from "../contracts/json-schema.ts"

type Json = Record<string, unknown>

export interface ToolSpec {
  readonly name: string
  readonly title: string
  readonly description: string
  /** The API operation whose request schema the tool takes. */
  readonly operation: OperationName
  /** Fields the server fills from the session when the caller leaves them out. */
  readonly sessionFields?: ReadonlyArray<"stepId">
}

export const TOOLS: ReadonlyArray<ToolSpec> = [
  {
    name: "remember",
    title: "Remember",
    description:
      "Record an entry in this agent's working memory: what the user said (origin USER), your own thought (INTERNAL), an advisor's note (ADVISOR) or a system message (SYSTEM), with optional tags, correlation id, mood and emotional weight. Returns its entryId and token count.",
    operation: "recordEntry",
  },
  {
    name: "recall",
    title: "Recall",
    description:
      "Search working and long-term memory for a query (one merged ranking of lexical and semantic matches), optionally filtered by origins, tags, correlation id or time range. With explain (on unless set to false) each result carries its score parts.",
    operation: "query",
  },
  {
    name: "context",
    title: "Build the context",
    description:
      "Build the prompt context from working memory within the agent's budget, or a lower limit, for the current step (the one begun in this session unless stepId is given). Returns the text, its token count and the entries served.",
    operation: "buildContext",
    sessionFields: ["stepId"],
  },
  {
    name: "begin_step",
    title: "Begin a reasoning step",
    description:
      "Begin a reasoning step, optionally with a focus (task, subgoal, query): entries that speak to the focus win the context's budget, and long-term entries may come back as cues for the step.",
    operation: "beginStep",
  },
  {
    name: "end_step",
    title: "End the step",
    description:
      "End the current step (the one begun in this session unless stepId is given): cues not referenced in it are dropped.",
    operation: "endStep",
    sessionFields: ["stepId"],
  },
  {
    name: "reference",
    title: "Reference entries used",
    description:
      "Report the entries you used in the current step, by entryId and/or by quoting their text; a referenced cue becomes a working entry again.",
    operation: "referenceEntries",
    sessionFields: ["stepId"],
  },
  {
    name: "raw",
    title: "Raw text of an entry",
    description: "The raw text and metadata of any entry this agent recorded, however far it has faded.",
    operation: "getRaw",
  },
  {
    name: "history",
    title: "An entry's history",
    description:
      "Every event of one entry in log order: recorded, each read and reference, each rung change with its fade score parts, demotion, cues.",
    operation: "getRaw",
  },
]

/** What the server supplies itself on every read. */
const SERVER_FIELDS = ["afterSeq"]

/** The API's request schema of the tool's operation, without the fields the session supplies. */
export const inputSchemaOf = (tool: ToolSpec): Json => {
  const request = (apiJsonSchema().operations as Record<string, { request: Json }>)[tool.operation]!.request
  const properties = { ...(request.properties as Json) }
  for (const field of SERVER_FIELDS) delete properties[field]
  const optional = new Set<string>([...SERVER_FIELDS, ...(tool.sessionFields ?? [])])
  const required = ((request.required as string[] | undefined) ?? []).filter((f) => !optional.has(f))
  const described = Object.fromEntries(
    Object.entries(properties).map(([name, schema]) =>
      tool.sessionFields?.includes(name as "stepId")
        ? [name, { ...(schema as Json), description: "the step; by default the one begun in this session" }]
        : [name, schema],
    ),
  )
  return { ...request, properties: described, required }
}
