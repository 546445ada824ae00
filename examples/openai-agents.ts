/**
 * Working memory in the OpenAI Agents SDK: three turns of `Runner.run` with a `WorkingMemorySession`. The
 * model is a scripted implementation of the SDK's `Model` interface, so no API key is needed; the history the
 * session handed the model on the third turn is printed. Run it against a running system:
 *
 *   npm run example:openai-agents     (NATS_URL, else nats://127.0.0.1:4222)
 */
import { randomBytes } from "node:crypto"
import {
  Agent,
  type AgentInputItem,
  type Model,
  type ModelRequest,
  type ModelResponse,
  Runner,
  type StreamEvent,
  Usage,
} from "@openai/agents"
import { WorkingMemoryClient } from "@working-memory/client"
import { WorkingMemorySession } from "@working-memory/openai-agents"

const turns = [
  { user: "My cat is called Miso.", reply: "Miso is a lovely name for a cat." },
  { user: "Will it rain in Lisbon tomorrow?", reply: "Showers are likely in the afternoon; take an umbrella." },
  { user: "What is my cat called?", reply: "Your cat is called Miso." },
]

/** A model that answers from a script, one reply per request, and keeps the requests it was sent. */
export class ScriptedModel implements Model {
  readonly requests: ModelRequest[] = []
  readonly #replies: ReadonlyArray<string>

  constructor(replies: ReadonlyArray<string>) {
    this.#replies = replies
  }

  async getResponse(request: ModelRequest): Promise<ModelResponse> {
    this.requests.push(request)
    const text = this.#replies[this.requests.length - 1] ?? "I have nothing to add."
    return {
      usage: new Usage(),
      output: [{ type: "message", role: "assistant", status: "completed", content: [{ type: "output_text", text }] }],
    }
  }

  async *getStreamedResponse(request: ModelRequest): AsyncIterable<StreamEvent> {
    const { output } = await this.getResponse(request)
    yield {
      type: "response_done",
      response: { id: `response-${this.requests.length}`, usage: new Usage(), output },
    } as StreamEvent
  }
}

/** One line per item, as the model was handed it. */
export const describeItem = (item: AgentInputItem): string => {
  if (!("role" in item)) return `${item.type}`
  const text =
    typeof item.content === "string"
      ? item.content
      : item.content.map((part) => ("text" in part ? part.text : `[${part.type}]`)).join(" ")
  return `${item.role}: ${text}`
}

/** The three turns; returns the history items the session handed the model on the last one. */
export const runOpenAiAgentsExample = async (wm: WorkingMemoryClient, sessionId: string) => {
  const model = new ScriptedModel(turns.map((t) => t.reply))
  const runner = new Runner({ modelProvider: { getModel: () => model }, tracingDisabled: true })
  const agent = new Agent({ name: "Assistant", instructions: "You are a helpful assistant." })
  const session = new WorkingMemorySession({ client: wm, sessionId, budget: 1_000 })
  for (const turn of turns) {
    const result = await runner.run(agent, turn.user, { session })
    console.log(`user: ${turn.user}\nmodel: ${result.finalOutput}`)
  }
  const input = model.requests.at(-1)?.input
  // The last item is the turn's own input; the items before it are the session's history.
  return Array.isArray(input) ? input.slice(0, -1) : []
}

if (import.meta.main) {
  const wm = await WorkingMemoryClient.connect()
  try {
    const history = await runOpenAiAgentsExample(wm, `agents-example-${randomBytes(4).toString("hex")}`)
    console.log(`\nThe history the session handed the model on turn 3:\n${history.map(describeItem).join("\n")}`)
  } finally {
    await wm.close()
  }
}
