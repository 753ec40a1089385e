"""Rich output: phases, waitpoint tables, the session overview, results and hints.

Every function is pure: it takes resource dicts (as the API returns them) and returns rich
renderables or strings; the commands print them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from sessionops.api.names import SEQUENCE_LABEL
from sessionops.views import InputView, RunView, SessionView

PLUGIN = "kubectl sessionops"
STYLES = {
    "Succeeded": "bold green", "Idle": "green", "Running": "bold blue", "Pending": "dim",
    "Waiting": "bold cyan", "Cancelling": "yellow", "Cancelled": "yellow", "Paused": "bold yellow",
    "Failed": "bold red", "Consumed": "green", "Rejected": "red",
}
TERMINAL = frozenset({"Succeeded", "Failed", "Cancelled"})


def phase(value: str | None) -> Text:
    value = value or "Pending"
    return Text(value, style=STYLES.get(value, ""))


def shorten(text: str, limit: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: max(limit - 3, 0)] + "..."


def format_args(args: dict[str, Any] | None, value_limit: int = 48) -> str:
    """``command="sh hello.sh" timeout_seconds=30``: one line, long values shortened."""
    return " ".join(f"{k}={shorten(json.dumps(v, ensure_ascii=False), value_limit)}"
                    for k, v in (args or {}).items())


def titled(title: str, table: Table) -> Group:
    """A table under a title line (a table's own title wraps to the table's width)."""
    return Group(Text(title, style="bold"), table)


def waitpoint_table(waitpoint: dict[str, Any], children: Sequence[dict[str, Any]] = ()) -> Group:
    """``children``: the run's ``status.children`` (a Delegation's children as the operator sees them)."""
    kind = waitpoint.get("kind")
    if kind == "Approval":
        table = Table(expand=False)
        table.add_column("#", justify="right")
        table.add_column("CALL ID", no_wrap=True)
        table.add_column("TOOL", no_wrap=True)
        table.add_column("ARGUMENTS", overflow="fold")
        table.add_column("DECISIONS", no_wrap=True)
        for i, call in enumerate(waitpoint.get("calls") or [], 1):
            table.add_row(str(i), str(call.get("callId")), str(call.get("tool")), format_args(call.get("args")),
                          "/".join(call.get("allowedDecisions") or ["Approve", "Reject"]))
        return titled(f"Approval needed ({waitpoint.get('id')})", table)
    if kind == "Question":
        table = Table(expand=False)
        table.add_column("#", justify="right")
        table.add_column("QUESTION", overflow="fold")
        table.add_column("OPTIONS", overflow="fold")
        table.add_column("ANSWER", no_wrap=True)
        for i, q in enumerate(waitpoint.get("questions") or [], 1):
            shape = "several, comma-separated" if q.get("multiSelect") else "one"
            if q.get("options") and q.get("allowOther"):
                shape += " (or your own)"
            elif not q.get("options"):
                shape = "free text"
            table.add_row(str(i), str(q.get("question")), ", ".join(q.get("options") or []) or "-", shape)
        return titled(f"Questions ({waitpoint.get('id')})", table)
    table = Table(expand=False)
    table.add_column("CHILD SESSION", no_wrap=True)
    table.add_column("NAME", no_wrap=True)
    table.add_column("PHASE", no_wrap=True)
    table.add_column("NEEDS", overflow="fold")
    seen = {c.get("session"): c for c in children}
    for session in waitpoint.get("children") or []:
        child = seen.get(session, {})
        needs = f"an answer at {child['waitingAt']}" if child.get("waitingAt") else child.get("heldBack") or ""
        table.add_row(str(session), str(child.get("name") or "-"), str(child.get("phase") or "-"), needs or "-")
    return titled(f"Waiting for delegated sessions ({waitpoint.get('id')})", table)


def _quote(text: str) -> str:
    return f'"{text}"' if any(c in text for c in " ,'") else text


def waitpoint_hints(run: str, waitpoint: dict[str, Any], ns: str = "") -> list[str]:
    """The commands that complete this waitpoint (``ns`` is e.g. ``" -n team-a"``)."""
    kind = waitpoint.get("kind")
    if kind == "Approval":
        calls = waitpoint.get("calls") or []
        if len(calls) <= 1:
            return [f"{PLUGIN} approve {run}{ns}", f'{PLUGIN} reject {run} --message "why not"{ns}']
        return [f"{PLUGIN} approve {run} --all{ns}",
                f'{PLUGIN} approve {run} 1 --reject 2 --message "why not"{ns}   (one command decides every call)']
    if kind == "Question":
        examples = []
        for q in waitpoint.get("questions") or []:
            options = q.get("options") or []
            if q.get("multiSelect"):
                examples.append(_quote(",".join(options[:2]) if options else "a,b"))
            else:
                examples.append(_quote(options[0]) if options else '"your answer"')
        return [f"{PLUGIN} answer {run} {' '.join(examples)}{ns}   (one answer per question, in order)"]
    return [f"resumes by itself when the delegated sessions finish; {PLUGIN} cancel {run}{ns} stops it"]


SHOWN_AS_ROWS = ("Ready", "Active", "Paused")
"""Session conditions whose news the rows above already tell (phase, active run, queue)."""


def failure(run: dict[str, Any]) -> str | None:
    for cond in RunView(run).conditions:
        if cond.get("type") == "Failed" and cond.get("status") == "True":
            return ": ".join(p for p in (cond.get("reason"), cond.get("message")) if p)
    return None


def outcome_line(run: dict[str, Any], limit: int = 80) -> str:
    """What a run came to, in one short line."""
    view = RunView(run)
    value = view.stored_phase
    if value == "Succeeded":
        return shorten(view.result_text, limit)
    if value == "Failed":
        return shorten(failure(run) or "failed", limit)
    if value in ("Cancelled", "Cancelling"):
        steps = view.completed_steps
        return "cancelled" + (f" (cleanup: {', '.join(steps)})" if steps else "")
    if value == "Waiting":
        wp = view.waitpoint
        count = len(wp.get("calls") or wp.get("questions") or wp.get("children") or [])
        noun = {"Approval": "call(s) to decide", "Question": "question(s) to answer"}.get(
            str(wp.get("kind")), "delegated session(s)")
        return f"{wp.get('kind', '?')}: {count} {noun}"
    return ""


def result_block(run: dict[str, Any]) -> Group:
    """The result text as is (easy to copy or pipe), between a header and the usage line."""
    view = RunView(run)
    usage = view.usage
    footer = (f"({usage.get('inputTokens', 0)} in / {usage.get('outputTokens', 0)} out tokens, "
              f"{len(view.segments)} segment(s))")
    text = view.result_text or "(empty result)"
    return Group(Text(f"result of {run['metadata']['name']}:", style="bold green"), Text(text),
                 Text(footer, style="dim"))


def sequence_of(obj: dict[str, Any]) -> int:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    try:
        return int(labels.get(SEQUENCE_LABEL) or InputView(obj).sequence)
    except ValueError:
        return 0


def runs_table(runs: Sequence[dict[str, Any]], title: str = "Recent runs") -> Group:
    table = Table(expand=False)
    table.add_column("RUN", no_wrap=True)
    table.add_column("PHASE", no_wrap=True)
    table.add_column("INPUTS")
    table.add_column("SEGMENTS", justify="right")
    table.add_column("OUTCOME", overflow="fold", min_width=30)
    for run in runs:
        view = RunView(run)
        table.add_row(view.name, phase(view.stored_phase), ", ".join(view.inputs), str(len(view.segments)),
                      outcome_line(run))
    return titled(title, table)


def input_preview(inp: dict[str, Any]) -> str:
    view = InputView(inp)
    if view.kind == "Resume":
        return f"resume {view.resume_run}"
    if view.kind == "Continue":
        return "continue"
    return shorten(" / ".join(m.get("content", "") for m in view.messages), 60)


def pending_table(inputs: Sequence[dict[str, Any]]) -> Group:
    table = Table(expand=False)
    table.add_column("INPUT", no_wrap=True)
    table.add_column("SEQ", justify="right")
    table.add_column("KIND")
    table.add_column("DELIVERY")
    table.add_column("CONTENT", overflow="fold")
    for inp in inputs:
        view = InputView(inp)
        table.add_row(view.name, str(view.stored_sequence or ""), view.kind, view.delivery or "-",
                      input_preview(inp))
    return titled("Queued inputs", table)


def session_overview(session: dict[str, Any], runs: Sequence[dict[str, Any]], inputs: Sequence[dict[str, Any]],
                     *, ns: str = "", recent: int = 5) -> list[RenderableType]:
    """``status``: the session, its queue, the active run (with its waitpoint) and recent runs."""
    name = session["metadata"]["name"]
    view = SessionView(session)
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()
    grid.add_row("Session", f"{name} (namespace {session['metadata'].get('namespace', '?')}, "
                            f"agent {view.agent_name or '?'})")
    grid.add_row("Phase", phase(view.phase))
    snapshot = view.context_snapshot or {}
    grid.add_row("Model", str(view.model or snapshot.get("model") or "-"))
    grid.add_row("Approval", str(view.approval_mode or snapshot.get("approvalMode") or "-"))
    # Counted from the inputs listed now (by the operator's own rule), like the table below,
    # not from the operator's last reconcile: an input received a moment ago is already pending.
    pending = sorted((i for i in inputs if InputView(i).pending), key=sequence_of)
    queue_text = Text(f"{len(pending)} pending")
    if view.paused:
        queue_text.append(", paused", style="bold yellow")
        if view.paused_reason:
            queue_text.append(f": {view.paused_reason}")
    if view.held_back:
        queue_text.append(f" (held back: {view.held_back})")
    grid.add_row("Queue", queue_text)
    active = view.active_run
    by_name = {r["metadata"]["name"]: r for r in runs}
    active_run = by_name.get(active) if active else None
    if active:
        row = Text(f"{active} ")
        row.append_text(phase(RunView(active_run).stored_phase))
        grid.add_row("Active run", row)
    else:
        grid.add_row("Active run", "-")
    parts: list[RenderableType] = [grid]
    for cond in view.conditions:
        if cond.get("status") == "True" and cond.get("type") not in SHOWN_AS_ROWS and cond.get("message"):
            parts.append(Text(f"{cond.get('type')}: {cond.get('message')}", style="dim"))
    if view.paused and not active:
        parts.append(Text(f"resume the queue: {PLUGIN} continue {name}{ns}", style="dim"))
    run = RunView(active_run)
    waitpoint = run.waitpoint
    if active_run and run.stored_phase == "Waiting" and waitpoint:
        parts.append(waitpoint_table(waitpoint, run.children))
        parts.extend(Text(h, style="dim") for h in waitpoint_hints(active, waitpoint, ns))
    if pending:
        parts.append(pending_table(pending))
    ordered = sorted(runs, key=sequence_of, reverse=True)[:recent]
    if ordered:
        parts.append(runs_table(ordered))
    return parts


def render_group(parts: Sequence[RenderableType]) -> Group:
    return Group(*parts)
