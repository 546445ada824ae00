import { Schema } from "effect"
import { Text } from "./text.ts"

const FocusText = Text(1, 4_000)

/** What the agent is working on: fading and retrieval measure relevance against it. */
export const Focus = Schema.Struct({
  task: Schema.optionalKey(FocusText),
  subgoal: Schema.optionalKey(FocusText),
  query: Schema.optionalKey(FocusText),
}).annotate({ description: "the current task, subgoal and/or query" })
export type Focus = typeof Focus.Type

/** A kind of task, used to pick per-task-kind fade settings (for example τ). */
export const TaskKind = Schema.String.check(Schema.isPattern(/^[A-Za-z0-9_-]{1,64}$/u))

export const focusText = (focus: Focus | null | undefined): string =>
  focus ? [focus.task, focus.subgoal, focus.query].filter((s): s is string => s !== undefined).join("\n") : ""
