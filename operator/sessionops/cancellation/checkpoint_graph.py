"""The checkpoint-only graph: the agent's topology with a model and tools that refuse to run.

It is built by the same ``compile_agent`` as the worker's graph, so node names,
channels, reducers and edges are identical; only the state API is used on it.
Routing after a tools update does not depend on which tools exist (none returns
directly), so stand-ins for the built-in names are enough; MCP tools need none.
"""

from __future__ import annotations

from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatResult
from langchain_core.tools import BaseTool
from langgraph.graph.state import CompiledStateGraph

from sessionops.agent.builder import compile_agent, select_tools
from sessionops.api.snapshot import BUILTIN_TOOLS, ContextSnapshot


class CheckpointOnlyError(RuntimeError):
    """Something tried to run a model or a tool in the checkpoint-only graph."""


class CheckpointOnlyModel(BaseChatModel):
    @property
    def _llm_type(self) -> str:
        return "checkpoint-only"

    def bind_tools(self, tools: Any, **kwargs: Any) -> CheckpointOnlyModel:
        return self

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        raise CheckpointOnlyError("the checkpoint-only graph never calls a model")


class CheckpointOnlyTool(BaseTool):
    description: str = "Stand-in of a tool in the checkpoint-only graph; it never runs."

    def _run(self, *args: Any, **kwargs: Any) -> Any:
        raise CheckpointOnlyError(f"the checkpoint-only graph never runs a tool ({self.name})")


def checkpoint_graph(snapshot: ContextSnapshot, checkpointer: Any) -> CompiledStateGraph:
    """The run's topology over ``checkpointer``; safe to use while no worker runs the thread."""
    tools = select_tools(snapshot, [CheckpointOnlyTool(name=name) for name in BUILTIN_TOOLS])
    return compile_agent(snapshot, model=CheckpointOnlyModel(), tools=tools, checkpointer=checkpointer)
