"""A LangGraph graph whose long-term memory is working memory: three turns, each in a thread of its own, so
what the model knows of earlier turns comes from the store alone.

    pip install -e "clients/python[langgraph]"
    NATS_URL=nats://127.0.0.1:4222 python3 examples/python/langgraph_store.py [agentId]

The model is a scripted chat model (no API key): it answers a question about the user's cat from the memories the
graph hands it. On turn 3 the example prints those memories.
"""

from __future__ import annotations

import asyncio
import re
import sys
from dataclasses import dataclass
from typing import Any, NotRequired

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.runtime import Runtime

from working_memory import WorkingMemoryClient, new_request_id
from working_memory.integrations.langgraph import WorkingMemoryStore


class ScriptedChatModel(BaseChatModel):
    """Answers "What is my cat called?" from the memories in its system message, and anything else with "Noted."."""

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        memory = " ".join(str(m.content) for m in messages if isinstance(m, SystemMessage))
        question = str(messages[-1].content)
        name = re.search(r"cat is called (\w+)", memory)
        answer = f"Your cat is called {name.group(1)}." if "cat" in question and name else "Noted."
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=answer))])

    @property
    def _llm_type(self) -> str:
        return "scripted"


@dataclass
class Context:
    user_id: str


model = ScriptedChatModel()


async def chat(state: MessagesState, runtime: Runtime[Context]) -> dict[str, Any]:
    assert runtime.store is not None
    namespace = ("memories", runtime.context.user_id)
    question = str(state["messages"][-1].content)
    found = await runtime.store.asearch(namespace, query=question, limit=3)
    memory = "\n".join(str(item.value["text"]) for item in found)
    prompt = [SystemMessage(f"What you remember of the user:\n{memory}"), *state["messages"]]
    reply = await model.ainvoke(prompt)
    await runtime.store.aput(namespace, new_request_id(), {"text": question})
    return {"messages": [reply], "memory": memory}


class State(MessagesState):
    memory: NotRequired[str]


async def main(agent_id: str) -> None:
    wm = await WorkingMemoryClient.connect()  # NATS_URL, else nats://127.0.0.1:4222
    await wm.agent(agent_id).register(role="main")
    store = WorkingMemoryStore(wm, agent_id=agent_id)  # a namespace is a tag path in this agent
    builder = StateGraph(State, context_schema=Context)
    builder.add_node("chat", chat)
    builder.add_edge(START, "chat")
    graph = builder.compile(store=store)
    turns = ["My cat is called Miso.", "The weather is lovely today.", "What is my cat called?"]
    for turn, text in enumerate(turns, 1):
        start: State = {"messages": [HumanMessage(content=text)]}
        result = await graph.ainvoke(start, context=Context(user_id="ana"))
        print(f"turn {turn}: {text} -> {result['messages'][-1].content}")
    print("memory handed to the model on turn 3:")
    print(result["memory"])
    await wm.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "langgraph-assistant"))
