"""Adapters of agent frameworks onto working memory, one module each (docs/frameworks-python.md):

- ``working_memory.integrations.langgraph``: :class:`WorkingMemoryStore`, a LangGraph ``BaseStore``
  (``pip install working-memory-client[langgraph]``);
- ``working_memory.integrations.openai_agents``: :class:`WorkingMemorySession`, an OpenAI Agents SDK
  ``Session`` (``[openai-agents]``);
- ``working_memory.integrations.adk``: :class:`WorkingMemoryService`, a Google ADK ``BaseMemoryService``
  (``[adk]``).

``[integrations]`` installs every framework. Each module imports only its own framework, so this package
imports none of them.
"""
