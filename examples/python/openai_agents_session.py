"""An OpenAI Agents SDK agent whose conversation history is working memory: three turns through the real Runner
with a session on the agent's memory.

    pip install -e "clients/python[openai-agents]"
    NATS_URL=nats://127.0.0.1:4222 python3 examples/python/openai_agents_session.py [agentId]

The model is the SDK's own scripted model (agents.testing; no API key): it answers a question about the user's
cat from the history the session hands it. On turn 3 the example prints that history, the model's whole input.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys

from agents import Agent, Runner, set_tracing_disabled
from agents.testing import ModelCall, ModelStep, ScriptedModel, assistant_message

from working_memory import WorkingMemoryClient
from working_memory.integrations.openai_agents import WorkingMemorySession


def item_text(item: object) -> str:
    content = item.get("content") if isinstance(item, dict) else None
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return json.dumps(item)


def answer(call: ModelCall) -> ModelStep:
    texts = [item_text(item) for item in call.input]
    name = next((m.group(1) for t in texts[:-1] if (m := re.search(r"cat is called (\w+)", t))), None)
    reply = f"Your cat is called {name}." if "cat" in texts[-1] and name else "Noted."
    return ModelStep(output=[assistant_message(reply)])


async def main(agent_id: str) -> None:
    set_tracing_disabled(True)  # no OpenAI account to export traces to
    wm = await WorkingMemoryClient.connect()  # NATS_URL, else nats://127.0.0.1:4222
    model = ScriptedModel([ModelStep.respond(answer) for _ in range(3)])
    agent = Agent(name="assistant", instructions="Answer briefly.", model=model)
    session = WorkingMemorySession("chat-ana", wm, agent_id=agent_id, role="main")
    for turn, text in enumerate(["My cat is called Miso.", "The weather is lovely today.", "What is my cat called?"], 1):
        result = await Runner.run(agent, text, session=session)
        print(f"turn {turn}: {text} -> {result.final_output}")
    last = model.last_call
    assert last is not None
    print("memory handed to the model on turn 3:")
    for item in last.input:
        role = item.get("role", "") if isinstance(item, dict) else ""
        print(f"{role}: {item_text(item)}")
    await session.close()
    await wm.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "openai-assistant"))
