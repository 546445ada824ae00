/**
 * Working memory for the OpenAI Agents SDK: a `Session` whose history is an agent's working memory.
 *
 *   const session = new WorkingMemorySession({ client: wm, sessionId: "support-42", budget: 2000 })
 *   await run(agent, "What is my cat called?", { session })
 *
 * `addItems` records the items as entries. `getItems` serves the conversation as it fits the budget: a step
 * focused on the latest user message builds the context, and each entry it serves — at full text, at its key
 * points or as a summary as it has faded, or recalled from long-term as a cue — is an input item. The log is
 * append-only and audited: `popItem` records that the item is withdrawn from the conversation and
 * `clearSession` starts a new epoch of the session on a fresh agent; both stop serving the items while the
 * log keeps them.
 */
import { createHash } from "node:crypto"
import type { AgentInputItem, Session } from "@openai/agents"
import {
  AgentAlreadyRegistered,
  type AgentClient,
  type RequestOf,
  type ResponseOf,
  ValidationError,
  type WorkingMemoryClient,
} from "@working-memory/client"

export interface WorkingMemorySessionOptions {
  readonly client: WorkingMemoryClient
  /** The session's id, as `getSessionId` returns it. */
  readonly sessionId: string
  /**
   * The agent that holds the conversation (default: the session id). After `clearSession` the session goes on
   * as `<agentId>_1`, `<agentId>_2`…: at most 56 characters of A-Z, a-z, 0-9, `_` and `-`.
   */
  readonly agentId?: string
  /** Most tokens `getItems` serves, in the agent's encoding (default 4000). */
  readonly budget?: number
  /**
   * How the session's agents are registered on first use (default: `{ role: "custom", budget }`); `false`
   * when they are registered already. An agent registered before with another configuration keeps it.
   */
  readonly register?: Omit<RequestOf<"registerAgent">, "requestId"> | false
  /** The name the assistant's messages are recorded under: "Assistant: …" (default "Assistant"). */
  readonly assistantName?: string
}

/** What the tags of the entries this session records say. */
export const TAGS = {
  user: "user",
  reply: "reply",
  system: "system",
  reasoning: "reasoning",
  toolCall: "tool-call",
  toolResult: "tool-result",
  session: "session",
} as const

/** The correlation id of the session's own records: withdrawn items and cleared epochs. */
export const SESSION_RECORDS = "wm-session"
const WITHDRAWN = "wm-pop-"
const CLEARED = "wm-clear-"

const AGENT_ID = /^[A-Za-z0-9_-]{1,56}$/u
const MAX_FOCUS_CHARS = 4_000
/** A batch of entries stays well inside the server's max_payload (1 MiB by default) and WM_MAX_BATCH_ENTRIES. */
const BATCH_BYTES = 512 * 1024
const BATCH_ENTRIES = 200

type Entry = Omit<RequestOf<"recordEntry">, "requestId"> & { readonly requestId?: string }
type ViewEntry = ResponseOf<"getView">["entries"][number]
type Origin = Entry["origin"]

/** The label the context builder writes before a raw text of each origin ("" for what the agent heard). */
const LABEL: Readonly<Record<Origin, string>> = {
  USER: "",
  INTERNAL: "thought: ",
  ADVISOR: "advisor: ",
  SYSTEM: "system: ",
}

const utf8 = new TextEncoder()

/** The id of the record that withdraws an entry: one per entry, so withdrawing it twice records it once. */
const withdrawalOf = (entryId: string) =>
  `${WITHDRAWN}${createHash("sha256").update(entryId).digest("base64url").slice(0, 24)}`

const isSessionRecord = (entryId: string) => entryId.startsWith(WITHDRAWN) || entryId.startsWith(CLEARED)

const joined = (texts: ReadonlyArray<string | null | undefined>) =>
  texts
    .filter((t): t is string => typeof t === "string" && t.trim().length > 0)
    .join("\n")
    .trim()

const textOfOutput = (output: unknown): string => {
  if (typeof output === "string") return output
  const parts = Array.isArray(output) ? output : [output]
  return joined(
    parts.map((part: { type?: string; text?: string }) =>
      part.type === "text" || part.type === "input_text" ? part.text : part.type ? `[${part.type}]` : undefined,
    ),
  )
}

/** The entry an item is recorded as, or null for an item with no text to remember (an image, a hosted call). */
const entryOfItem = (item: AgentInputItem, assistantName: string): Entry | null => {
  const entry = (origin: Origin, content: string, tag: string): Entry | null =>
    content.trim().length > 0 ? { origin, content, tags: [tag] } : null
  if ("role" in item) {
    if (item.role === "user") {
      const content =
        typeof item.content === "string"
          ? item.content
          : joined(item.content.map((part) => (part.type === "input_text" ? part.text : undefined)))
      return entry("USER", content, TAGS.user)
    }
    if (item.role === "assistant") {
      const text = joined(
        item.content.map((part) =>
          part.type === "output_text" ? part.text : part.type === "refusal" ? part.refusal : undefined,
        ),
      )
      return text ? entry("USER", `${assistantName}: ${text}`, TAGS.reply) : null
    }
    if (item.role === "system") return entry("SYSTEM", item.content, TAGS.system)
    return null
  }
  switch (item.type) {
    case "reasoning":
      return entry("INTERNAL", joined(item.content.map((part) => part.text)), TAGS.reasoning)
    case "function_call":
      return entry("INTERNAL", `Called ${item.name} with ${item.arguments}`, TAGS.toolCall)
    case "function_call_result":
      return entry("SYSTEM", `Tool result (${item.name}): ${textOfOutput(item.output)}`, TAGS.toolResult)
    default:
      return null
  }
}

/** The input item of an entry's text: the assistant's replies as its messages, what it heard as user messages. */
const itemOf = (origin: Origin, tags: ReadonlyArray<string>, text: string, assistantName: string): AgentInputItem => {
  if (tags.includes(TAGS.reply)) {
    const prefix = `${assistantName}: `
    return {
      role: "assistant",
      status: "completed",
      content: [{ type: "output_text", text: text.startsWith(prefix) ? text.slice(prefix.length) : text }],
    }
  }
  return origin === "USER" ? { role: "user", content: text } : { role: "system", content: text }
}

const formBody = (item: ResponseOf<"buildContext">["items"][number], entry: ViewEntry) =>
  (item.form === "raw" ? entry.content : item.form === "keyPoints" ? entry.keyPoints : entry.summary)?.trim()

/**
 * Each served item's block of the built context: its label and text as the builder rendered and counted them,
 * without the date lines between blocks, so the items together never hold more tokens than the context.
 *
 * Fading goes on while the session reads: an entry may hold another form in the view read after the build than
 * the one it was served at, or have left working memory. Fading only ever takes forms away (key points keep the
 * raw text beside them; a summary replaces both), so the view read before the build still holds the raw text
 * and key points of what it held then, and the view read after it the summaries made since. An item found in
 * neither is left out: what is served is what was counted.
 */
const blocksOf = (context: ResponseOf<"buildContext">, views: ReadonlyArray<ReadonlyArray<ViewEntry>>) => {
  const byId = new Map<string, ViewEntry[]>()
  for (const entries of views)
    for (const entry of entries) {
      const held = byId.get(entry.id)
      if (held === undefined) byId.set(entry.id, [entry])
      else held.push(entry)
    }
  const blocks: { readonly entry: ViewEntry; readonly text: string }[] = []
  let cursor = 0
  for (const item of context.items) {
    for (const entry of byId.get(item.entryId) ?? []) {
      const body = formBody(item, entry)
      if (!body) continue
      const at = context.text.indexOf(body, cursor)
      if (at < 0) continue
      const start = Math.max(cursor, context.text.lastIndexOf("\n", at - 1) + 1)
      blocks.push({ entry, text: context.text.slice(start, at + body.length) })
      cursor = at + body.length
      break
    }
  }
  return blocks
}

interface State {
  readonly epoch: number
  readonly agent: AgentClient
  /** The session's records in this epoch's agent: the ids of its withdrawals. */
  readonly records: Set<string>
}

export class WorkingMemorySession implements Session {
  readonly #client: WorkingMemoryClient
  readonly #sessionId: string
  readonly #baseId: string
  readonly #budget: number
  readonly #register: Omit<RequestOf<"registerAgent">, "requestId"> | false
  readonly #assistantName: string
  readonly #agents = new Map<string, AgentClient>()
  readonly #registered = new Map<string, Promise<void>>()
  #state: Promise<State> | undefined

  constructor(options: WorkingMemorySessionOptions) {
    this.#client = options.client
    this.#sessionId = options.sessionId
    this.#baseId = options.agentId ?? options.sessionId
    this.#budget = options.budget ?? 4_000
    this.#register = options.register ?? { role: "custom", budget: this.#budget }
    this.#assistantName = options.assistantName ?? "Assistant"
  }

  /** One client per agent, so every read waits for this session's own writes to that agent. */
  #agent(agentId: string): AgentClient {
    let agent = this.#agents.get(agentId)
    if (agent === undefined) {
      agent = this.#client.agent(agentId)
      this.#agents.set(agentId, agent)
    }
    return agent
  }

  async #registeredAgent(agentId: string): Promise<AgentClient> {
    const agent = this.#agent(agentId)
    const register = this.#register
    if (register !== false) {
      let done = this.#registered.get(agentId)
      if (done === undefined) {
        done = agent.register(register).then(
          () => undefined,
          (error: unknown) => {
            this.#registered.delete(agentId)
            if (!(error instanceof AgentAlreadyRegistered)) throw error
          },
        )
        this.#registered.set(agentId, done)
      }
      await done
    }
    return agent
  }

  #agentIdOf(epoch: number): string {
    return epoch === 0 ? this.#baseId : `${this.#baseId}_${epoch}`
  }

  async #records(agent: AgentClient): Promise<Set<string>> {
    const { entries } = await agent.thread(SESSION_RECORDS)
    return new Set(entries.filter((e) => e.agentId === agent.agentId).map((e) => e.entryId))
  }

  /** The session's epoch, its agent and its withdrawals, read from the log once. */
  #current(): Promise<State> {
    this.#state ??= (async () => {
      if (!AGENT_ID.test(this.#baseId))
        throw ValidationError.one("agentId", "must be 1-56 characters of A-Z, a-z, 0-9, '_' or '-'")
      const base = await this.#registeredAgent(this.#baseId)
      const baseRecords = await this.#records(base)
      const epoch = Math.max(
        0,
        ...[...baseRecords].filter((id) => id.startsWith(CLEARED)).map((id) => Number(id.slice(CLEARED.length))),
      )
      if (epoch === 0) return { epoch, agent: base, records: baseRecords }
      const agent = await this.#registeredAgent(this.#agentIdOf(epoch))
      return { epoch, agent, records: await this.#records(agent) }
    })().catch((error: unknown) => {
      this.#state = undefined
      throw error
    })
    return this.#state
  }

  /** Whether the session serves an entry: neither one of its own records nor withdrawn. */
  #serves(state: State, entryId: string): boolean {
    return !isSessionRecord(entryId) && !state.records.has(withdrawalOf(entryId))
  }

  /** The conversation's entries in working memory, oldest first: served, and no cue of a step. */
  #conversation(state: State, entries: ReadonlyArray<ViewEntry>) {
    return entries.filter((e) => !e.transient && this.#serves(state, e.id))
  }

  async getSessionId(): Promise<string> {
    return this.#sessionId
  }

  /**
   * The conversation as it fits the budget, oldest first: the items of a context built in a step focused on
   * the latest user message. With `limit`, the latest `limit` of them.
   */
  async getItems(limit?: number): Promise<AgentInputItem[]> {
    const state = await this.#current()
    const { agent } = state
    const before = await agent.view()
    const latest = this.#conversation(state, before.entries)
      .filter((e) => e.origin === "USER" && !e.tags.includes(TAGS.reply))
      .at(-1)
    const focus = (latest?.content ?? latest?.keyPoints ?? latest?.summary ?? "").trim()
    const { stepId } = await agent.beginStep(
      focus ? { focus: { query: [...focus].slice(0, MAX_FOCUS_CHARS).join("") } } : {},
    )
    let items: AgentInputItem[]
    try {
      const context = await agent.buildContext({ stepId, limit: this.#budget })
      // Read while the step is open: it holds the step's cues.
      const view = await agent.view()
      items = blocksOf(context, [view.entries, before.entries])
        .filter((block) => this.#serves(state, block.entry.id))
        .map((block) => itemOf(block.entry.origin, block.entry.tags, block.text, this.#assistantName))
    } finally {
      await agent.endStep(stepId)
    }
    if (limit === undefined) return items
    return limit > 0 ? items.slice(-limit) : []
  }

  /** Records the items, in order; an item the API refuses (one above its content limit) throws its typed error. */
  async addItems(items: AgentInputItem[]): Promise<void> {
    const { agent } = await this.#current()
    const entries = items.flatMap((item) => entryOfItem(item, this.#assistantName) ?? [])
    let batch: Entry[] = []
    let bytes = 0
    const flush = async () => {
      if (batch.length === 0) return
      const sending = batch
      batch = []
      bytes = 0
      const { results } = await agent.recordMany(sending)
      for (const result of results) if (!result.ok) throw result.error
    }
    for (const entry of entries) {
      const size = utf8.encode(entry.content).length + 256
      if (batch.length >= BATCH_ENTRIES || bytes + size > BATCH_BYTES) await flush()
      batch.push(entry)
      bytes += size
    }
    await flush()
  }

  /**
   * Withdraws the most recent item still in the conversation and returns it (its full text, whatever it has
   * faded to): a record in the log says so, and no later `getItems` serves it. The entry stays in the log.
   */
  async popItem(): Promise<AgentInputItem | undefined> {
    const state = await this.#current()
    const { agent } = state
    const view = await agent.view()
    const last = this.#conversation(state, view.entries).at(-1)
    if (last === undefined) return undefined
    const raw = await agent.raw(last.id)
    const withdrawal = withdrawalOf(last.id)
    await agent.record({
      requestId: withdrawal,
      origin: "SYSTEM",
      content: `Withdrawn from the conversation: entry ${last.id}.`,
      tags: [TAGS.session],
      correlationId: SESSION_RECORDS,
    })
    state.records.add(withdrawal)
    return itemOf(raw.origin, raw.tags, `${LABEL[raw.origin]}${raw.content}`, this.#assistantName)
  }

  /**
   * Ends the session's current epoch: a record in the log says so, and the session goes on empty on the next
   * epoch's agent. The earlier epochs' agents and entries stay in the log.
   */
  async clearSession(): Promise<void> {
    const state = await this.#current()
    const epoch = state.epoch + 1
    const next = this.#agentIdOf(epoch)
    if (!/^[A-Za-z0-9_-]{1,64}$/u.test(next))
      throw ValidationError.one("agentId", `the next epoch's agent id '${next}' is not a valid agent id`)
    const base = this.#agent(this.#baseId)
    await base.record({
      requestId: `${CLEARED}${epoch}`,
      origin: "SYSTEM",
      content: `The conversation was cleared; it goes on as agent ${next}.`,
      tags: [TAGS.session],
      correlationId: SESSION_RECORDS,
    })
    const agent = await this.#registeredAgent(next)
    this.#state = Promise.resolve({ epoch, agent, records: new Set<string>() })
  }
}
