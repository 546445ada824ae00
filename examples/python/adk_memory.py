"""A Google ADK agent whose memory service is working memory: three turns through the real Runner, each in a
session of its own, so what the model knows of earlier turns comes from the memory service alone
(``preload_memory`` searches it before every model call).

    pip install -e "clients/python[adk]"
    NATS_URL=nats://127.0.0.1:4222 python3 examples/python/adk_memory.py [userId]

The model is a scripted ``BaseLlm`` (no API key): it answers a question about the user's cat from the memories
ADK hands it. On turn 3 the example prints those memories.
"""

from __future__ import annotations

import asyncio
import re
import sys
from collections.abc import AsyncGenerator

from google.adk.agents import LlmAgent
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.adk.tools.preload_memory_tool import PreloadMemoryTool
from google.genai import types

from working_memory import WorkingMemoryClient
from working_memory.integrations.adk import WorkingMemoryService


class ScriptedLlm(BaseLlm):
    """Answers "What is my cat called?" from the memories in its request, and anything else with "Noted."."""

    model: str = "scripted"
    requests: list[LlmRequest] = []

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        self.requests.append(llm_request)
        texts = [part.text for content in llm_request.contents for part in content.parts or [] if part.text]
        memory = " ".join(t for t in texts if "<PAST_CONVERSATIONS>" in t)
        name = re.search(r"cat is called (\w+)", memory)
        reply = f"Your cat is called {name.group(1)}." if "cat" in texts[-1] and name else "Noted."
        usage = types.GenerateContentResponseUsageMetadata(prompt_token_count=0, candidates_token_count=0, total_token_count=0)
        content = types.Content(role="model", parts=[types.Part.from_text(text=reply)])
        yield LlmResponse(content=content, usage_metadata=usage)


async def main(user_id: str) -> None:
    wm = await WorkingMemoryClient.connect()  # NATS_URL, else nats://127.0.0.1:4222
    memory = WorkingMemoryService(wm, role="main")  # the agent pets--<user_id> holds the user's memory
    llm = ScriptedLlm()
    agent = LlmAgent(name="assistant", model=llm, instruction="Answer briefly.", tools=[PreloadMemoryTool()])
    sessions = InMemorySessionService()
    runner = Runner(app_name="pets", agent=agent, session_service=sessions, memory_service=memory)
    for turn, text in enumerate(["My cat is called Miso.", "The weather is lovely today.", "What is my cat called?"], 1):
        session = await sessions.create_session(app_name="pets", user_id=user_id)
        message = types.Content(role="user", parts=[types.Part.from_text(text=text)])
        reply = ""
        async for event in runner.run_async(user_id=user_id, session_id=session.id, new_message=message):
            if event.is_final_response() and event.content and event.content.parts:
                reply = event.content.parts[0].text or ""
        print(f"turn {turn}: {text} -> {reply}")
        done = await sessions.get_session(app_name="pets", user_id=user_id, session_id=session.id)
        assert done is not None
        await memory.add_session_to_memory(done)
    print("memory handed to the model on turn 3:")
    for content in llm.requests[-1].contents:
        for part in content.parts or []:
            if part.text and "<PAST_CONVERSATIONS>" in part.text:
                print(part.text.strip())
    await wm.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "ana"))
