/**
 * Working memory in LangGraph.js: a graph compiled with a `WorkingMemoryStore`, run for three turns. Each turn
 * a node searches the store for the user's message and hands what it found to the model (LangChain's own
 * scripted chat model, so no API key is needed), and the next node puts the message into the store. The search
 * result of the third turn is printed. Run it against a running system:
 *
 *   npm run example:langgraph         (NATS_URL, else nats://127.0.0.1:4222)
 */
import { randomBytes, randomUUID } from "node:crypto"
import { HumanMessage, SystemMessage } from "@langchain/core/messages"
import { FakeListChatModel } from "@langchain/core/utils/testing"
import { END, type LangGraphRunnableConfig, MessagesAnnotation, START, StateGraph } from "@langchain/langgraph"
import { WorkingMemoryClient } from "@working-memory/client"
import { type SearchItem, WorkingMemoryStore } from "@working-memory/langgraph"

const turns = [
  { user: "My cat is called Miso.", reply: "Miso is a lovely name for a cat." },
  { user: "Will it rain in Lisbon tomorrow?", reply: "Showers are likely in the afternoon; take an umbrella." },
  { user: "What is my cat called?", reply: "Your cat is called Miso." },
]

/** What the user said last. */
const question = (state: typeof MessagesAnnotation.State) =>
  String(state.messages.findLast((m) => HumanMessage.isInstance(m))?.content ?? "")

/** The three turns; returns the store's search result on the last one. */
export const runLangGraphExample = async (wm: WorkingMemoryClient, userId: string) => {
  const store = new WorkingMemoryStore({ client: wm, agents: [userId] })
  const namespace = [userId, "memories"]
  const model = new FakeListChatModel({ responses: turns.map((t) => t.reply) })
  const searches: SearchItem[][] = []

  const graph = new StateGraph(MessagesAnnotation)
    // What the store remembers that speaks to the question goes to the model with it.
    .addNode("respond", async (state, config: LangGraphRunnableConfig) => {
      const memories = (await config.store?.search(namespace, { query: question(state), limit: 3 })) ?? []
      searches.push(memories)
      const known = memories.map((m) => `- ${String(m.value.text)}`).join("\n")
      const reply = await model.invoke([
        new SystemMessage(`What you know about the user:\n${known}`),
        ...state.messages,
      ])
      return { messages: [reply] }
    })
    // Then what the user said is remembered for the turns to come.
    .addNode("remember", async (state, config: LangGraphRunnableConfig) => {
      await config.store?.put(namespace, randomUUID(), { text: question(state) })
      return {}
    })
    .addEdge(START, "respond")
    .addEdge("respond", "remember")
    .addEdge("remember", END)
    .compile({ store })

  for (const turn of turns) {
    const { messages } = await graph.invoke({ messages: [new HumanMessage(turn.user)] })
    console.log(`user: ${turn.user}\nmodel: ${String(messages.at(-1)?.content)}`)
  }
  return searches.at(-1) ?? []
}

if (import.meta.main) {
  const wm = await WorkingMemoryClient.connect()
  try {
    const found = await runLangGraphExample(wm, `langgraph-example-${randomBytes(4).toString("hex")}`)
    console.log(
      `\nThe store's search on turn 3 (what the model was handed):\n${found
        .map((item) => `${item.score?.toFixed(3)}  ${item.namespace.join("/")}  ${JSON.stringify(item.value)}`)
        .join("\n")}`,
    )
  } finally {
    await wm.close()
  }
}
