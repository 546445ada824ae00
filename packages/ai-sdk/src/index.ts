/**
 * Working memory for the Vercel AI SDK: a language model middleware for `wrapLanguageModel`.
 *
 *   const model = wrapLanguageModel({ model: openai("gpt-5"), middleware: workingMemoryMiddleware({ agent, budget: 2000 }) })
 *   await generateText({ model, prompt: "What is my cat called?" })
 *
 * Each call to the model is one reasoning step of the agent: a step focused on the latest user message
 * begins, the context built within the budget goes into the prompt as a system message, the call's new user
 * and tool messages are recorded, the model runs, its reply is recorded (the reasoning as the agent's own
 * thought, the text as what it said), the memory entries the reply quotes are reported as used, and the step
 * ends — for `generateText` when the model answers, for `streamText` when the stream finishes.
 */
import { createHash, randomBytes } from "node:crypto"
import type {
  LanguageModelV4CallOptions,
  LanguageModelV4Content,
  LanguageModelV4GenerateResult,
  LanguageModelV4Message,
  LanguageModelV4Middleware,
  LanguageModelV4StreamPart,
  LanguageModelV4ToolResultOutput,
} from "@ai-sdk/provider"
import {
  type AgentClient,
  NoResponse,
  NotCaughtUp,
  Overloaded,
  type RequestOf,
  type ResponseOf,
  Unavailable,
  ValidationError,
} from "@working-memory/client"

export type BuiltContext = ResponseOf<"buildContext">

export interface WorkingMemoryMiddlewareOptions {
  /** The agent whose memory the model uses; it must be registered (`agent.register(…)`). */
  readonly agent: AgentClient
  /**
   * Most tokens of memory put into the prompt: the built context's limit, in the agent's encoding. At most the
   * agent's budget in force (its budget when omitted); 16 at least.
   */
  readonly budget?: number
  /** The name the model's replies are recorded under: "Assistant: …" (default "Assistant"). */
  readonly assistantName?: string
  /** The system message that carries the memory (default: one line saying what it is, then the context). */
  readonly formatMemory?: (context: BuiltContext) => string
  /**
   * A reply is reported as using a memory entry when it repeats at least this many consecutive words of the
   * entry's text (default 4), or the whole text of a shorter entry.
   */
  readonly minQuoteWords?: number
}

/** What the tags of the entries this middleware records say. */
export const TAGS = {
  user: "user",
  toolResult: "tool-result",
  reasoning: "reasoning",
  reply: "reply",
  toolCall: "tool-call",
} as const

/** The API's limit on an entry's content, in UTF-8 bytes (docs/api.md). */
const MAX_CONTENT_BYTES = 64 * 1024
/** The API's limits on a reference's quotes: how many, and the characters of each. */
const MAX_QUOTES = 16
const QUOTE_CHARS = { min: 8, max: 2_000 } as const
/** A focus text is 1 to 4000 characters. */
const MAX_FOCUS_CHARS = 4_000

export const defaultFormatMemory = (context: BuiltContext): string =>
  `What you remember, oldest first (unlabelled lines are what you heard; "thought:" lines are your own thoughts):\n${context.text}`

type Entry = Omit<RequestOf<"recordEntry">, "requestId"> & { readonly requestId?: string }

/** One call of the model, from its prompt to its end. */
interface Turn {
  readonly stepId: string
  /** Null when the build failed. */
  readonly context: BuiltContext | null
  /** Set once the step has ended (or ending it was attempted). */
  ended: boolean
}

const utf8 = new TextEncoder()

/** Splits a text into pieces of at most `maxBytes` UTF-8 bytes each, at whitespace where it can. */
const splitUtf8 = (text: string, maxBytes: number): string[] => {
  const pieces: string[] = []
  let rest = text
  while (utf8.encode(rest).length > maxBytes) {
    let end = 0
    let bytes = 0
    let lastSpace = -1
    for (const ch of rest) {
      const size = utf8.encode(ch).length
      if (bytes + size > maxBytes) break
      bytes += size
      end += ch.length
      if (/\s/u.test(ch)) lastSpace = end
    }
    const cut = lastSpace > end / 2 ? lastSpace : end
    pieces.push(rest.slice(0, cut))
    rest = rest.slice(cut)
  }
  if (rest.trim().length > 0) pieces.push(rest)
  return pieces.filter((p) => p.trim().length > 0)
}

const normalise = (text: string) => text.toLowerCase().replace(/\s+/g, " ").trim()

/**
 * The passages of `reply` that repeat an entry's text: for each text, its longest run of at least `minWords`
 * consecutive words also in the reply (or the whole text, when all of it is in the reply), as the API
 * compares them — lower case, whitespace collapsed. Longest first, at most the API's sixteen.
 */
const quotesOf = (reply: string, texts: ReadonlyArray<string>, minWords: number): string[] => {
  const replyWords = normalise(reply).split(" ").filter(Boolean)
  if (replyWords.length === 0) return []
  const starts = new Map<string, number[]>()
  for (const [i, word] of replyWords.entries()) starts.set(word, [...(starts.get(word) ?? []), i])
  const found = new Set<string>()
  for (const text of texts) {
    const words = normalise(text).split(" ").filter(Boolean)
    let best: [number, number] = [0, 0]
    for (let i = 0; i < words.length; i++) {
      for (const j of starts.get(words[i]!) ?? []) {
        let n = 0
        while (i + n < words.length && j + n < replyWords.length && words[i + n] === replyWords[j + n]) n++
        if (n > best[1] - best[0]) best = [i, i + n]
      }
    }
    const run = words.slice(best[0], best[1])
    const quote = run.join(" ")
    const whole = run.length === words.length
    if ((run.length >= minWords || (whole && run.length > 0)) && quote.length >= QUOTE_CHARS.min)
      found.add(quote.length > QUOTE_CHARS.max ? quote.slice(0, QUOTE_CHARS.max).trimEnd() : quote)
  }
  return [...found].sort((a, b) => b.length - a.length).slice(0, MAX_QUOTES)
}

const textOfToolOutput = (output: LanguageModelV4ToolResultOutput): string => {
  switch (output.type) {
    case "text":
    case "error-text":
      return output.value
    case "json":
    case "error-json":
      return JSON.stringify(output.value)
    case "execution-denied":
      return `execution denied${output.reason ? `: ${output.reason}` : ""}`
    case "content":
      return output.value
        .map((part) => (part.type === "text" ? part.text : part.type === "file" ? `[${part.mediaType}]` : ""))
        .filter(Boolean)
        .join("\n")
  }
}

const userText = (message: LanguageModelV4Message): string =>
  message.role === "user"
    ? message.content
        .map((part) => (part.type === "text" ? part.text : ""))
        .filter((t) => t.trim().length > 0)
        .join("\n")
    : ""

/** The entries a prompt message is recorded as: a user message's text, a tool message's results. */
const entriesOfMessage = (message: LanguageModelV4Message): Entry[] => {
  if (message.role === "user") {
    const content = userText(message)
    return content.trim().length > 0 ? [{ origin: "USER", content, tags: [TAGS.user] }] : []
  }
  if (message.role === "tool")
    return message.content.flatMap((part) =>
      part.type === "tool-result"
        ? [
            {
              origin: "SYSTEM" as const,
              content: `Tool result (${part.toolName}): ${textOfToolOutput(part.output)}`,
              tags: [TAGS.toolResult],
            },
          ]
        : [],
    )
  return []
}

/**
 * The messages of a prompt this call adds: the user and tool messages after its last assistant message (a
 * multi-turn prompt carries the earlier ones, recorded when they were new; a tool loop adds its results).
 */
const newMessages = (prompt: ReadonlyArray<LanguageModelV4Message>): LanguageModelV4Message[] => {
  const lastAssistant = prompt.findLastIndex((m) => m.role === "assistant")
  return prompt.slice(lastAssistant + 1).filter((m) => m.role === "user" || m.role === "tool")
}

/** What the model produced, as it will be recorded. */
interface Reply {
  readonly reasoning: string
  readonly text: string
  readonly toolCalls: ReadonlyArray<{ readonly toolName: string; readonly input: string }>
}

const replyOfContent = (content: ReadonlyArray<LanguageModelV4Content>): Reply => ({
  reasoning: content
    .flatMap((c) => (c.type === "reasoning" ? [c.text] : []))
    .join("\n")
    .trim(),
  text: content
    .flatMap((c) => (c.type === "text" ? [c.text] : []))
    .join("")
    .trim(),
  toolCalls: content.flatMap((c) => (c.type === "tool-call" ? [{ toolName: c.toolName, input: c.input }] : [])),
})

/**
 * The middleware. One agent holds one conversation at a time: a call begins the agent's step and a second
 * call while it is open is refused with `InvalidState`.
 */
export const workingMemoryMiddleware = (options: WorkingMemoryMiddlewareOptions): LanguageModelV4Middleware => {
  const { agent } = options
  const assistantName = options.assistantName ?? "Assistant"
  const formatMemory = options.formatMemory ?? defaultFormatMemory
  const minQuoteWords = options.minQuoteWords ?? 4
  const turns = new WeakMap<LanguageModelV4CallOptions, Turn>()
  // A call retried with the same prompt (the SDK's retries) records its messages under the same request ids,
  // which the service answers as duplicates: nothing is recorded twice. A new turn gets new ids.
  const instance = randomBytes(6).toString("base64url")
  let completedTurns = 0
  const requestIdOf = (index: number, entry: Entry) =>
    createHash("sha256")
      .update(`${instance}\n${completedTurns}\n${index}\n${entry.origin}\n${entry.content}`)
      .digest("base64url")
      .slice(0, 32)

  const endStep = async (turn: Turn) => {
    if (turn.ended) return
    turn.ended = true
    await agent.endStep(turn.stepId)
  }

  /** Ends the step after a failure, keeping the failure as the error the caller sees. */
  const abandon = async (turn: Turn) => {
    await endStep(turn).catch(() => undefined)
  }

  const recordAll = async (entries: ReadonlyArray<Entry>) => {
    if (entries.length === 0) return
    const { results } = await agent.recordMany(entries)
    for (const result of results) if (!result.ok) throw result.error
  }

  /** Reports the entries the reply quotes, records the reply, and ends the step. */
  const finish = async (turn: Turn, reply: Reply) => {
    try {
      // Reported before the reply is recorded: a quote refers to every entry that holds it, the reply's own too.
      const said = [reply.reasoning, reply.text].filter(Boolean).join("\n")
      const items = turn.context?.items ?? []
      if (said && items.length > 0) {
        const view = await agent.view()
        const served = new Set(items.map((item) => item.entryId))
        const texts = view.entries
          .filter((e) => served.has(e.id))
          .flatMap((e) => [e.content, e.keyPoints, e.summary].filter((t): t is string => t !== null))
        const quotes = quotesOf(said, texts, minQuoteWords)
        if (quotes.length > 0)
          await agent.reference(turn.stepId, [], quotes).catch((error: unknown) => {
            // A quoted entry that faded to a form without the passage since the view was read: nothing to report.
            if (error instanceof ValidationError && error.field === "quotes") return
            // Which entries the reply used could not be looked for now (retrieval restarting, overloaded): that
            // report is no reason to lose the reply, which is still recorded and its step ended.
            const notNow =
              error instanceof Unavailable ||
              error instanceof NotCaughtUp ||
              error instanceof Overloaded ||
              error instanceof NoResponse
            if (!notNow) throw error
          })
      }
      const prefix = `${assistantName}: `
      await recordAll([
        ...(reply.reasoning
          ? splitUtf8(reply.reasoning, MAX_CONTENT_BYTES).map((content) => ({
              origin: "INTERNAL" as const,
              content,
              tags: [TAGS.reasoning],
            }))
          : []),
        ...(reply.text
          ? splitUtf8(reply.text, MAX_CONTENT_BYTES - utf8.encode(prefix).length).map((piece) => ({
              origin: "USER" as const,
              content: `${prefix}${piece}`,
              tags: [TAGS.reply],
            }))
          : []),
        ...reply.toolCalls.map((call) => ({
          origin: "INTERNAL" as const,
          content: splitUtf8(`Called ${call.toolName} with ${call.input}`, MAX_CONTENT_BYTES)[0] ?? call.toolName,
          tags: [TAGS.toolCall],
        })),
      ])
      await endStep(turn)
      completedTurns++
    } catch (error) {
      await abandon(turn)
      throw error
    }
  }

  return {
    specificationVersion: "v4",

    transformParams: async ({ params }) => {
      const latestUser = params.prompt.findLast((m) => m.role === "user")
      const focus = latestUser ? userText(latestUser).trim() : ""
      const { stepId } = await agent.beginStep(
        focus ? { focus: { query: [...focus].slice(0, MAX_FOCUS_CHARS).join("") } } : {},
      )
      try {
        const context = await agent.buildContext({
          stepId,
          ...(options.budget === undefined ? {} : { limit: options.budget }),
        })
        // Recorded after the build: the context holds what this prompt does not already carry.
        const fresh = newMessages(params.prompt)
        const offset = params.prompt.length - fresh.length
        await recordAll(
          fresh.flatMap((message, i) =>
            entriesOfMessage(message).map((entry, j) => ({
              ...entry,
              requestId: requestIdOf((offset + i) * 1_000 + j, entry),
            })),
          ),
        )
        const prompt = [...params.prompt]
        if (context.items.length > 0) {
          // After the caller's own system messages: some providers take system messages only at the start.
          const at = prompt.findIndex((m) => m.role !== "system")
          prompt.splice(at < 0 ? prompt.length : at, 0, { role: "system", content: formatMemory(context) })
        }
        const transformed: LanguageModelV4CallOptions = { ...params, prompt }
        turns.set(transformed, { stepId, context, ended: false })
        return transformed
      } catch (error) {
        await abandon({ stepId, context: null, ended: false })
        throw error
      }
    },

    wrapGenerate: async ({ doGenerate, params }): Promise<LanguageModelV4GenerateResult> => {
      const turn = turns.get(params)
      if (turn === undefined) return doGenerate()
      let result: LanguageModelV4GenerateResult
      try {
        result = await doGenerate()
      } catch (error) {
        await abandon(turn)
        throw error
      }
      await finish(turn, replyOfContent(result.content))
      return result
    },

    wrapStream: async ({ doStream, params }) => {
      const turn = turns.get(params)
      if (turn === undefined) return doStream()
      let result: Awaited<ReturnType<typeof doStream>>
      try {
        result = await doStream()
      } catch (error) {
        await abandon(turn)
        throw error
      }
      const reasoning: string[] = []
      const text: string[] = []
      const toolCalls: { toolName: string; input: string }[] = []
      const watch = new TransformStream<LanguageModelV4StreamPart, LanguageModelV4StreamPart>({
        transform(part, controller) {
          if (part.type === "text-delta") text.push(part.delta)
          else if (part.type === "reasoning-delta") reasoning.push(part.delta)
          else if (part.type === "tool-call") toolCalls.push({ toolName: part.toolName, input: part.input })
          controller.enqueue(part)
        },
        // The stream ends once the reply is recorded, its references reported and the step ended.
        async flush() {
          await finish(turn, { reasoning: reasoning.join("").trim(), text: text.join("").trim(), toolCalls })
        },
        async cancel() {
          await abandon(turn)
        },
      })
      return { ...result, stream: result.stream.pipeThrough(watch) }
    },
  }
}
