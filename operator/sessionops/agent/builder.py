"""The agent graph of a turn: langchain's ``create_agent`` plus our middleware.

The topology (node names, channels) never depends on the snapshot or on which
callables the worker passes: every middleware is always present (a disabled one is a
no-op). Checkpoints store node and channel names, so the checkpoint-only graph of the
cancellation cleanup (``compile_agent`` with a model and tools that raise) matches the
graph that wrote them.

Nodes: ``step_limit.before_agent``, ``step_limit.before_model``,
``steering.before_model``, ``summarization.before_model``, ``model``,
``steering.after_model``, ``tools`` (one ``Send`` task per tool call).
"""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, NotRequired

from langchain.agents import create_agent
from langchain.agents.middleware.model_retry import ModelRetryMiddleware
from langchain.agents.middleware.summarization import SummarizationMiddleware
from langchain.agents.middleware.types import AgentMiddleware, AgentState
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.tools import BaseTool
from langgraph.graph.state import CompiledStateGraph

from sessionops.agent.access import ToolAccessMiddleware, ToolFilter
from sessionops.agent.approval import ApprovalMiddleware
from sessionops.agent.limits import StepLimitMiddleware, ToolResultLimitMiddleware
from sessionops.agent.steering import SteeringMiddleware
from sessionops.agent.tools import Toolbox, allowed_skills, builtin_tools
from sessionops.api.common import ApprovalMode
from sessionops.api.snapshot import BUILTIN_TOOLS, ContextSnapshot, Summarization


class AgentNodes:
    """Node names that other packages rely on (cancellation updates ``as_node=TOOLS``)."""

    MODEL = "model"
    TOOLS = "tools"
    LOOP_ENTRY = "step_limit.before_model"
    """Where every model round starts: the node a merge of tool results triggers."""


class SessionState(AgentState):
    """The thread's state: messages plus business state that tools write through reducers.

    ``files_written`` (paths ``write_file`` wrote, one entry per completed call) proves
    that business state merges exactly once through a cancellation.
    """

    files_written: NotRequired[Annotated[list[str], operator.add]]


class _Summarization(SummarizationMiddleware):
    # A stable node name: checkpoints record node names, a class rename must not break them.
    @property
    def name(self) -> str:
        return "summarization"


SUMMARY_PROMPT_SUFFIX = "\n\n<messages>\nMessages to summarize:\n{messages}\n</messages>"


def summarization_middleware(model: BaseChatModel, config: Summarization) -> SummarizationMiddleware:
    """langchain's summarization configured from the snapshot.

    ``thresholdMessages`` means "more messages than this" (langchain triggers at >=), and the
    user's prompt is an instruction, so the messages placeholder is appended (braces escaped).
    """
    prompt = config.prompt.replace("{", "{{").replace("}", "}}") + SUMMARY_PROMPT_SUFFIX
    return _Summarization(
        model, trigger=("messages", config.threshold_messages + 1),
        keep=("messages", config.keep_messages), summary_prompt=prompt,
    )


def select_tools(snapshot: ContextSnapshot, tools: Sequence[BaseTool]) -> list[BaseTool]:
    """The tools the snapshot selects: built-in names (``delegate`` included) follow
    ``snapshot.tools``; other extra tools (MCP, named ``<server>__<tool>``) are always kept."""
    names = [t.name for t in tools]
    if duplicates := sorted({n for n in names if names.count(n) > 1}):
        raise ValueError(f"duplicate tool names: {', '.join(duplicates)}")
    if snapshot.tools == "all":
        return list(tools)
    selected = set(snapshot.tools)
    return [t for t in tools if t.name not in BUILTIN_TOOLS or t.name in selected]


def system_prompt(snapshot: ContextSnapshot, skills: Mapping[str, str] | None) -> str:
    """The snapshot's prompt plus preloaded skills and the names ``load_skill`` accepts.

    A preloaded skill that is not visible now (revoked, deleted) is left out: skills are
    resolved at execution time like every other resource.
    """
    skills = skills or {}
    allowed = allowed_skills(skills, snapshot.skills)
    parts = [snapshot.system_prompt]
    for name in snapshot.preload_skills:
        if name in skills:
            parts.append(f"## Skill: {name}\n\n{skills[name]}")
    if allowed:
        parts.append("Skills you can load with the load_skill tool: " + ", ".join(allowed))
    return "\n\n".join(p for p in parts if p)


def agent_middleware(
    snapshot: ContextSnapshot,
    model: BaseChatModel,
    *,
    steering: SteeringMiddleware | None = None,
    tool_filter: ToolFilter | None = None,
) -> list[AgentMiddleware]:
    """The middleware, in order. Order matters:

    1. ``step_limit`` first: its ``before_model`` ends the turn before steers are claimed,
       and its ``wrap_model_call`` is outermost, so a retried model call counts once.
    2. ``steering`` has the only ``after_model``: its jump back to the model skips nothing.
    3. Tool calls pass ``tool_access`` (outermost: a refused call never asks for approval,
       and a resumed call is re-authorized), then ``approval``, then the result limit.
    """
    approval_enabled = ApprovalMode(snapshot.approval_mode) == ApprovalMode.DEFAULT
    return [
        StepLimitMiddleware(snapshot.max_execution_steps),
        steering if steering is not None else SteeringMiddleware(),
        summarization_middleware(model, snapshot.summarization),
        # "error": a model that keeps failing fails the turn (the operator pauses the queue)
        # instead of ending it with an AI message that looks like an answer.
        ModelRetryMiddleware(max_retries=snapshot.model_retries, on_failure="error"),
        ToolAccessMiddleware(tool_filter),
        ApprovalMiddleware(snapshot.require_approval, enabled=approval_enabled),
        ToolResultLimitMiddleware(snapshot.summarization.tool_result_token_limit),
    ]


def compile_agent(
    snapshot: ContextSnapshot,
    *,
    model: BaseChatModel,
    tools: Sequence[BaseTool],
    checkpointer: Any,
    steering: SteeringMiddleware | None = None,
    tool_filter: ToolFilter | None = None,
    prompt: str | None = None,
) -> CompiledStateGraph:
    """The graph from explicit tools: the one builder behind ``build_agent`` and the
    cancellation's checkpoint-only graph."""
    return create_agent(
        model,
        list(tools),
        system_prompt=prompt if prompt is not None else snapshot.system_prompt,
        middleware=agent_middleware(snapshot, model, steering=steering, tool_filter=tool_filter),
        state_schema=SessionState,
        checkpointer=checkpointer,
    )


def build_agent(
    snapshot: ContextSnapshot,
    *,
    model: BaseChatModel,
    workdir: Path | None = None,
    checkpointer: Any,
    skills: Mapping[str, str] | None = None,
    extra_tools: Sequence[BaseTool] = (),
    steering: SteeringMiddleware | None = None,
    tool_filter: ToolFilter | None = None,
    toolbox: Toolbox | None = None,
) -> CompiledStateGraph:
    """The compiled agent graph of a turn.

    Run it with ``config={"configurable": {"thread_id": <session uid>}}`` and
    ``durability="sync"``. ``extra_tools`` is the extension point for ``delegate`` and
    MCP tools; ``tool_filter`` decides, at each model and tool call, which tool names the sender
    may use now. The workspace and shell tools run in ``toolbox`` (the worker's tools
    process), or in this process on ``workdir`` without one.
    """
    tools = builtin_tools(workdir, toolbox=toolbox, skills=skills, skill_selection=snapshot.skills)
    tools += list(extra_tools)
    return compile_agent(
        snapshot, model=model, tools=select_tools(snapshot, tools), checkpointer=checkpointer,
        steering=steering, tool_filter=tool_filter, prompt=system_prompt(snapshot, skills),
    )


def node_names(graph: CompiledStateGraph) -> list[str]:
    """The graph's node names (without ``__start__``), sorted: the topology fingerprint."""
    return sorted(n for n in graph.nodes if n != "__start__")
