"""The Python client in a few lines: register an agent, record, run a focused step.

    pip install -e clients/python
    NATS_URL=nats://127.0.0.1:4222 python3 examples/quickstart.py [agentId]
"""

import asyncio
import sys

from working_memory import WorkingMemoryClient


async def main(agent_id: str) -> None:
    wm = await WorkingMemoryClient.connect()  # NATS_URL, else nats://127.0.0.1:4222
    agent = wm.agent(agent_id)
    await agent.register(role="main")
    await agent.record(origin="USER", content="Ship the report by Friday.", tags=["deadline"])
    step = await agent.begin_step(focus={"task": "weekly report"})
    context = await agent.build_context(step_id=step["stepId"])  # context["text"] goes into the prompt
    await agent.reference(step["stepId"], [context["items"][0]["entryId"]])
    await agent.end_step(step["stepId"])
    found = await agent.query("report deadline", explain=True)
    await wm.close()
    print(context["text"], end="")
    print(f"{context['tokens']}/{context['budget']} tokens; best match: {found['results'][0]['text']}")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "planner"))
