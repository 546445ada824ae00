/**
 * Working memory in the Vercel AI SDK: three turns of `generateText` through a model wrapped with
 * `workingMemoryMiddleware`, each turn sending only its new message (the memory carries the rest). The model
 * is the AI SDK's own test model answering from a script, so no API key is needed; what it was handed on the
 * third turn is printed. Run it against a running system:
 *
 *   npm run example:ai-sdk            (NATS_URL, else nats://127.0.0.1:4222)
 */
import { randomBytes } from "node:crypto"
import type { LanguageModelV4CallOptions } from "@ai-sdk/provider"
import { workingMemoryMiddleware } from "@working-memory/ai-sdk"
import { WorkingMemoryClient } from "@working-memory/client"
import { generateText, wrapLanguageModel } from "ai"
import { MockLanguageModelV4 } from "ai/test"

const turns = [
  { user: "My cat is called Miso.", reply: "Miso is a lovely name for a cat." },
  { user: "Will it rain in Lisbon tomorrow?", reply: "Showers are likely in the afternoon; take an umbrella." },
  { user: "What is my cat called?", reply: "Your cat is called Miso." },
]

/** A scripted model: it answers each turn from the script and keeps the prompts it was handed. */
export const scriptedModel = () => {
  const prompts: LanguageModelV4CallOptions["prompt"][] = []
  const model = new MockLanguageModelV4({
    doGenerate: async ({ prompt }) => {
      prompts.push(prompt)
      const turn = turns[prompts.length - 1]
      return {
        content: [{ type: "text", text: turn?.reply ?? "I have nothing to add." }],
        finishReason: { unified: "stop", raw: undefined },
        usage: {
          inputTokens: { total: 0, noCache: 0, cacheRead: 0, cacheWrite: 0 },
          outputTokens: { total: 0, text: 0, reasoning: 0 },
        },
        warnings: [],
      }
    },
  })
  return { model, prompts }
}

/** The three turns; returns the system message of memory the model was handed on the last one. */
export const runAiSdkExample = async (wm: WorkingMemoryClient, agentId: string) => {
  const agent = wm.agent(agentId)
  await agent.register({ role: "custom", budget: 2_000 })
  const { model, prompts } = scriptedModel()
  const remembering = wrapLanguageModel({ model, middleware: workingMemoryMiddleware({ agent, budget: 1_000 }) })
  for (const turn of turns) {
    const { text } = await generateText({ model: remembering, prompt: turn.user })
    console.log(`user: ${turn.user}\nmodel: ${text}`)
  }
  const memory = prompts.at(-1)?.find((message) => message.role === "system")
  return memory?.role === "system" ? memory.content : ""
}

if (import.meta.main) {
  const wm = await WorkingMemoryClient.connect()
  try {
    const memory = await runAiSdkExample(wm, `ai-sdk-example-${randomBytes(4).toString("hex")}`)
    console.log(`\nThe memory the model was handed on turn 3:\n${memory}`)
  } finally {
    await wm.close()
  }
}
