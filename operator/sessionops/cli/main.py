"""``kubectl sessionops``: talk to agent sessions from the command line.

Exit codes: 0 done; 1 invalid request or usage (also: forbidden, cluster unreachable);
2 conflict (the state does not allow it now, or a key re-used for a different intent);
3 not found; 4 the watched run failed or was cancelled; 5 timeout; 130 interrupted.
"""

from __future__ import annotations

import contextvars
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.text import Text
from typer.core import TyperGroup

from sessionops.api.common import ApprovalMode
from sessionops.cli import render, transcript
from sessionops.cli.client import INPUTS, RUNS, SESSIONS, Kube, connect
from sessionops.cli.errors import (
    EXIT_CONFLICT,
    EXIT_NOT_FOUND,
    EXIT_OK,
    EXIT_TIMEOUT,
    EXIT_USER,
    CliError,
    from_exception,
)
from sessionops.cli.inputs import (
    APPROVE,
    FOLLOW_UP,
    REJECT,
    STEER,
    answer_problems,
    continue_input,
    intent_mismatches,
    message_input,
    new_key,
    parse_answers,
    plan_decisions,
    resume_input,
)
from sessionops.cli.watch import Watcher
from sessionops.views import InputView, RunView, SessionView

PROG = "kubectl sessionops"


def _out() -> Console:
    # markup=False: resource text (messages, reasons) is printed as is, never as rich markup;
    # soft_wrap: long lines (results, failure reasons) are not cut into the console's width.
    return Console(highlight=False, markup=False, soft_wrap=True)


def _err() -> Console:
    return Console(stderr=True, highlight=False, markup=False, soft_wrap=True)


# typer vendors click in recent releases: take its exception classes from typer's public ones.
_UsageError = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "UsageError")
_ClickException = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")
# The namespace of the running command, for "not found in namespace ..." messages.
_namespace: contextvars.ContextVar[str | None] = contextvars.ContextVar("sessionops_namespace", default=None)


class PluginGroup(TyperGroup):
    """Maps failures to the plugin's exit codes; usage errors are user errors (1), not 2 (conflict)."""

    def main(self, *args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("prog_name", PROG)
        return super().main(*args, **kwargs)

    def make_context(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().make_context(*args, **kwargs)
        except _UsageError as e:
            e.exit_code = EXIT_USER
            raise

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except _UsageError as e:
            e.exit_code = EXIT_USER
            raise
        except (typer.Exit, typer.Abort, _ClickException, KeyboardInterrupt):
            raise
        except Exception as e:
            error = from_exception(e, _namespace.get())
            if error is None:
                raise
            err = _err()
            err.print(Text(f"error: {error.message}", style="red"))
            for line in error.details:
                err.print(f"  {line}")
            raise typer.Exit(error.code) from None


app = typer.Typer(
    cls=PluginGroup, name="kubectl-sessionops", add_completion=False, no_args_is_help=True,
    pretty_exceptions_enable=False, rich_markup_mode=None, context_settings={"help_option_names": ["-h", "--help"]},
    help="Talk to sessionops agent sessions: send messages, decide approvals, answer questions, "
         "cancel and continue turns, and follow them.\n\n"
         "Exit codes: 0 ok, 1 invalid request or usage, 2 conflict, 3 not found, "
         "4 watched run failed or was cancelled, 5 timeout, 130 interrupted.")


KubeconfigOpt = Annotated[Path | None, typer.Option(
    "--kubeconfig", help="Kubeconfig file (default: $KUBECONFIG, then ~/.kube/config).", show_default=False)]
ContextOpt = Annotated[str | None, typer.Option("--context", help="Kubeconfig context to use.", show_default=False)]
NamespaceOpt = Annotated[str | None, typer.Option(
    "-n", "--namespace", help="Namespace (default: the context's namespace, then 'default').", show_default=False)]
KeyOpt = Annotated[str | None, typer.Option(
    "--key", help="Idempotency key: the input's name is derived from it; re-running with the same key "
                  "never sends twice.", show_default=False)]
WatchOpt = Annotated[bool, typer.Option("--watch", "-w", help="Then follow the run (as `watch`).")]
TimeoutOpt = Annotated[float | None, typer.Option(
    "--timeout", help="Seconds to follow before giving up (exit 5). Default: no limit.", show_default=False)]
IntervalOpt = Annotated[float, typer.Option("--interval", help="Seconds between polls.", min=0.05)]
NoChecksOpt = Annotated[bool, typer.Option(
    "--no-client-checks", help="Send as given and let admission decide (skips the plugin's own checks).")]


_globals: contextvars.ContextVar[tuple[Path | None, str | None, str | None]] = contextvars.ContextVar(
    "sessionops_globals", default=(None, None, None))


@app.callback()
def _global_options(kubeconfig: KubeconfigOpt = None, context: ContextOpt = None,
                    namespace: NamespaceOpt = None) -> None:
    """Connection options are accepted here (before the command) or after it, as with kubectl."""
    _globals.set((kubeconfig, context, namespace))


def _connect(kubeconfig: Path | None, context: str | None, namespace: str | None) -> Kube:
    g_kubeconfig, g_context, g_namespace = _globals.get()
    kube = connect(kubeconfig or g_kubeconfig, context or g_context, namespace or g_namespace)
    _namespace.set(kube.namespace)
    return kube


def _watcher(kube: Kube, out: Console, timeout: float | None, interval: float = 0.5, **kw: Any) -> Watcher:
    # The run's steps arrive through the watch API (a plain Kube only: test doubles script phases).
    steps = (lambda run: transcript.StepFollower(kube, out, run).start()) if isinstance(kube, Kube) else None
    return Watcher(kube, out, timeout=timeout, interval=interval, steps=steps, **kw)


def _describe_input(obj: dict[str, Any]) -> str:
    view = InputView(obj)
    parts = [f"sequence {view.stored_sequence or '?'}", f"phase {view.phase}"]
    if view.delivery:
        parts.append(str(view.delivery))
    if view.consumed_by:
        parts.append(f"run {view.consumed_by}")
    return ", ".join(parts)


def _create_input(kube: Kube, out: Console, body: dict[str, Any], *, key_hint: str) -> tuple[dict[str, Any], bool]:
    """Create the input; if its name exists, it is the same intent (already received) or a conflict."""
    from kubernetes.client.exceptions import ApiException

    name = body["metadata"]["name"]
    existing = kube.find(INPUTS, name)
    if existing is None:
        try:
            return kube.create(INPUTS, body), True
        except ApiException as e:
            if e.status != 409 or "AlreadyExists" not in str(e.body):
                raise
            existing = kube.get(INPUTS, name)
    mismatches = intent_mismatches(body["spec"], existing.get("spec") or {})
    if mismatches:
        raise CliError(f"{key_hint} already used by input {name} for a different request "
                       f"(nothing was sent): " + "; ".join(m.field for m in mismatches),
                       EXIT_CONFLICT, [str(m) for m in mismatches])
    out.print(f"already received: input {name} ({_describe_input(existing)})")
    return existing, False


def _resolve_run(kube: Kube, ref: str) -> dict[str, Any] | None:
    """A run by name, or a session's active run (None: the session has none)."""
    run = kube.find(RUNS, ref)
    if run is not None:
        return run
    session = kube.find(SESSIONS, ref)
    if session is None:
        raise CliError(f'AgentRun "{ref}" not found in namespace {kube.namespace} (nor a session of that name)',
                       EXIT_NOT_FOUND)
    active = SessionView(session).active_run
    return kube.get(RUNS, active) if active else None


def _waiting_run(kube: Kube, ref: str) -> tuple[dict[str, Any], dict[str, Any]]:
    run = _resolve_run(kube, ref)
    if run is None:
        raise CliError(f"session {ref} has no active run", EXIT_CONFLICT)
    view = RunView(run)
    if view.phase != "Waiting" or not view.waitpoint:
        raise CliError(f"run {view.name} is not waiting for input (phase {view.phase})", EXIT_CONFLICT)
    return run, dict(view.waitpoint)


def _ns_flag(kube: Kube) -> str:
    return f" -n {kube.namespace}" if kube.namespace_explicit else ""


# ---------------------------------------------------------------------------------------------------------------

@app.command()
def send(
    session: Annotated[str, typer.Argument(metavar="SESSION", help="The AgentSession.", show_default=False)],
    messages: Annotated[list[str], typer.Argument(
        metavar="MESSAGE", help="Each argument is one message (quote it); '-' reads one from stdin.",
        show_default=False)],
    follow_up: Annotated[bool, typer.Option("--follow-up", help="Queue it as a new turn (FIFO).")] = False,
    steer: Annotated[bool, typer.Option("--steer", help="Deliver it into the active turn.")] = False,
    model: Annotated[str | None, typer.Option("--model", help="One-shot model for this input (implies "
                                                                "--follow-up).", show_default=False)] = None,
    approval: Annotated[ApprovalMode | None, typer.Option(
        "--approval", help="One-shot approval mode (implies --follow-up).", case_sensitive=False,
        show_default=False)] = None,
    key: KeyOpt = None, watch: WatchOpt = False, timeout: TimeoutOpt = None,
    kubeconfig: KubeconfigOpt = None, context: ContextOpt = None, namespace: NamespaceOpt = None,
) -> None:
    """Send a message to a session (an AgentInput of kind Message).

    Without --follow-up / --steer, admission picks: Steer while a turn is active, else FollowUp.
    The input's name is <session>-<key>; re-sending the same key is recognized as the same
    request ("already received") or refused when the request differs (exit 2).
    """
    if follow_up and steer:
        raise CliError("give --follow-up or --steer, not both")
    texts = [sys.stdin.read().rstrip("\n") if m == "-" else m for m in messages]
    generated = key is None
    key = key or new_key()
    delivery = STEER if steer else FOLLOW_UP if follow_up else None
    body = message_input(session, texts, key=key, delivery=delivery, model=model,
                         approval=approval.value if approval else None)
    kube = _connect(kubeconfig, context, namespace)
    out = _out()
    obj, created = _create_input(kube, out, body, key_hint=f'key "{key}"')
    if created:
        out.print(f"sent input {obj['metadata']['name']} to session {session} ({_describe_input(obj)})")
    if generated:
        out.print(f"key: {key} (to retry without sending twice: --key {key})")
    if watch:
        raise typer.Exit(_watcher(kube, out, timeout).watch_input(obj["metadata"]["name"]))


def _decide(decision: str, run_ref: str, calls: list[str] | None, others: list[str] | None, all_calls: bool,
            message: str | None, key: str | None, no_client_checks: bool, watch: bool, timeout: float | None,
            kubeconfig: Path | None, context: str | None, namespace: str | None) -> None:
    kube = _connect(kubeconfig, context, namespace)
    out = _out()
    run, waitpoint = _waiting_run(kube, run_ref)
    decisions = plan_decisions(waitpoint, decision, calls or [], others=others or [], all_calls=all_calls,
                               message=message, client_checks=not no_client_checks)
    body = resume_input(run, key=key, decisions=decisions)
    name = run["metadata"]["name"]
    obj, created = _create_input(kube, out, body, key_hint=f"waitpoint {waitpoint['id']}" if key is None
                                 else f'key "{key}"')
    if created:
        tools = {c.get("callId"): c.get("tool") for c in waitpoint.get("calls") or []}
        out.print(f"resumed run {name} with input {obj['metadata']['name']} ({_describe_input(obj)}):")
        for d in decisions:
            line = Text(f"  {d['decision']:<8}", style="green" if d["decision"] == APPROVE else "red")
            line.append(f"{tools.get(d['callId'], '?')} ({d['callId']})")
            out.print(line)
    if watch:
        raise typer.Exit(_watcher(kube, out, timeout).watch_run(name, ignore_waitpoints=[waitpoint["id"]]))
    out.print(Text(f"follow it: {PROG} watch {name}{_ns_flag(kube)}", style="dim"))


CallsArg = Annotated[list[str] | None, typer.Argument(
    metavar="CALL", help="Pending calls: number (as listed), callId, toolCallId or tool name.",
    show_default=False)]
AllOpt = Annotated[bool, typer.Option("--all", help="Every pending call not decided otherwise.")]


@app.command()
def approve(
    run: Annotated[str, typer.Argument(metavar="RUN", help="The waiting AgentRun (or a session: its active run).",
                                       show_default=False)],
    calls: CallsArg = None, all_calls: AllOpt = False,
    reject: Annotated[list[str] | None, typer.Option(
        "--reject", metavar="CALL", help="Reject this call in the same resume (repeatable).",
        show_default=False)] = None,
    message: Annotated[str | None, typer.Option("--message", "-m", help="Sent with every decision of this "
                                                "resume (the model reads it with rejections).",
                                                show_default=False)] = None,
    key: KeyOpt = None, no_client_checks: NoChecksOpt = False, watch: WatchOpt = False, timeout: TimeoutOpt = None,
    kubeconfig: KubeconfigOpt = None, context: ContextOpt = None, namespace: NamespaceOpt = None,
) -> None:
    """Approve pending tool calls of a waiting run.

    One resume decides every pending call: name the calls to approve and --reject the others,
    or use --all. With a single pending call, no call needs naming.
    """
    _decide(APPROVE, run, calls, reject, all_calls, message, key, no_client_checks, watch, timeout,
            kubeconfig, context, namespace)


@app.command()
def reject(
    run: Annotated[str, typer.Argument(metavar="RUN", help="The waiting AgentRun (or a session: its active run).",
                                       show_default=False)],
    calls: CallsArg = None, all_calls: AllOpt = False,
    approve_: Annotated[list[str] | None, typer.Option(
        "--approve", metavar="CALL", help="Approve this call in the same resume (repeatable).",
        show_default=False)] = None,
    message: Annotated[str, typer.Option("--message", "-m", help="Why: told to the model with the rejection.",
                                         show_default=False)] = ...,  # type: ignore[assignment]
    key: KeyOpt = None, no_client_checks: NoChecksOpt = False, watch: WatchOpt = False, timeout: TimeoutOpt = None,
    kubeconfig: KubeconfigOpt = None, context: ContextOpt = None, namespace: NamespaceOpt = None,
) -> None:
    """Reject pending tool calls of a waiting run (the mirror image of `approve`)."""
    _decide(REJECT, run, calls, approve_, all_calls, message, key, no_client_checks, watch, timeout,
            kubeconfig, context, namespace)


@app.command()
def answer(
    run: Annotated[str, typer.Argument(metavar="RUN", help="The waiting AgentRun (or a session: its active run).",
                                       show_default=False)],
    answers: Annotated[list[str], typer.Argument(
        metavar="ANSWER", help="One per question, in order. Multi-select: comma-separated choices "
                                  "(\\, is a literal comma).", show_default=False)],
    key: KeyOpt = None, no_client_checks: NoChecksOpt = False, watch: WatchOpt = False, timeout: TimeoutOpt = None,
    kubeconfig: KubeconfigOpt = None, context: ContextOpt = None, namespace: NamespaceOpt = None,
) -> None:
    """Answer the questions of a waiting run (one answer per question, in order)."""
    kube = _connect(kubeconfig, context, namespace)
    out = _out()
    run_obj, waitpoint = _waiting_run(kube, run)
    values = parse_answers(waitpoint, answers)
    if not no_client_checks and (problems := answer_problems(waitpoint, values)):
        questions = [f"{i}. {q.get('question')} [{'; '.join(q.get('options') or []) or 'free text'}"
                     f"{', several' if q.get('multiSelect') else ''}{', or your own' if q.get('allowOther') else ''}]"
                     for i, q in enumerate(waitpoint.get("questions") or [], 1)]
        raise CliError(problems[0], EXIT_USER, problems[1:] + questions)
    body = resume_input(run_obj, key=key, answers=values)
    name = run_obj["metadata"]["name"]
    obj, created = _create_input(kube, out, body, key_hint=f"waitpoint {waitpoint['id']}" if key is None
                                 else f'key "{key}"')
    if created:
        out.print(f"resumed run {name} with input {obj['metadata']['name']} ({_describe_input(obj)})")
    if watch:
        raise typer.Exit(_watcher(kube, out, timeout).watch_run(name, ignore_waitpoints=[waitpoint["id"]]))
    out.print(Text(f"follow it: {PROG} watch {name}{_ns_flag(kube)}", style="dim"))


@app.command()
def cancel(
    run: Annotated[str, typer.Argument(metavar="RUN", help="The AgentRun (or a session: its active run).", show_default=False)],
    wait: Annotated[bool, typer.Option("--wait", help="Wait until the run is Cancelled.")] = False,
    timeout: TimeoutOpt = None,
    kubeconfig: KubeconfigOpt = None, context: ContextOpt = None, namespace: NamespaceOpt = None,
) -> None:
    """Cancel a turn (sets spec.cancel: true; repeating it is a no-op).

    The operator stops the turn's execution, cleans its checkpoint and pauses the session's
    queue: `continue` resumes the queue (it never revives the cancelled turn).
    """
    kube = _connect(kubeconfig, context, namespace)
    out = _out()
    obj = _resolve_run(kube, run)
    if obj is None:
        out.print(f"session {run} has no active run: nothing to cancel")
        return
    name = obj["metadata"]["name"]
    view = RunView(obj)
    value = view.phase
    if view.cancel_requested:
        out.print(f"cancel already requested for run {name} (phase {value})")
    elif value in render.TERMINAL:
        out.print(f"run {name} already ended ({value}): nothing to cancel")
        return
    else:
        kube.merge_patch(RUNS, name, {"spec": {"cancel": True}})
        session = view.session_name
        out.print(f"cancel requested for run {name} (was {value}); the queue of session {session} "
                  f"stays paused until `{PROG} continue {session}{_ns_flag(kube)}`")
    if wait:
        watcher = _watcher(kube, out, timeout, until_done=True, show_waitpoints=False)
        code = watcher.watch_run(name)
        if code == EXIT_TIMEOUT or watcher.final_phase == "Cancelled":
            raise typer.Exit(EXIT_TIMEOUT if code == EXIT_TIMEOUT else EXIT_OK)
        raise CliError(f"run {name} ended {watcher.final_phase} before the cancellation took effect", EXIT_CONFLICT)


@app.command("continue")
def continue_(
    session: Annotated[str, typer.Argument(metavar="SESSION", help="The AgentSession whose queue is paused.", show_default=False)],
    key: KeyOpt = None, watch: WatchOpt = False, timeout: TimeoutOpt = None,
    kubeconfig: KubeconfigOpt = None, context: ContextOpt = None, namespace: NamespaceOpt = None,
) -> None:
    """Resume a session's paused queue (after a failed or cancelled turn); queued inputs then run."""
    kube = _connect(kubeconfig, context, namespace)
    out = _out()
    generated = key is None
    key = key or new_key()
    obj, created = _create_input(kube, out, continue_input(session, key=key), key_hint=f'key "{key}"')
    if created:
        out.print(f"continue sent for session {session}: input {obj['metadata']['name']} ({_describe_input(obj)})")
    if generated:
        out.print(f"key: {key} (to retry without sending twice: --key {key})")
    if watch:
        raise typer.Exit(_watcher(kube, out, timeout).watch_input(obj["metadata"]["name"]))


@app.command()
def status(
    session: Annotated[str, typer.Argument(metavar="SESSION", help="The AgentSession.", show_default=False)],
    runs: Annotated[int, typer.Option("--runs", help="How many recent runs to list.", min=0)] = 5,
    kubeconfig: KubeconfigOpt = None, context: ContextOpt = None, namespace: NamespaceOpt = None,
) -> None:
    """Show a session: phase, model, approval mode, queue, the active run with its waitpoint, recent runs."""
    kube = _connect(kubeconfig, context, namespace)
    obj = kube.get(SESSIONS, session)
    parts = render.session_overview(obj, kube.list(RUNS, session), kube.list(INPUTS, session),
                                    ns=_ns_flag(kube), recent=runs)
    out = _out()
    for part in parts:
        out.print(part)


@app.command()
def watch(
    name: Annotated[str, typer.Argument(metavar="SESSION|RUN", help="A run, a session (its active or next run) "
                                        "or an input (the run it becomes).", show_default=False)],
    until_done: Annotated[bool, typer.Option(
        "--until-done", help="Keep following across waitpoints until the run ends (default: stop at a "
                             "waitpoint, since nothing happens until someone answers).")] = False,
    timeout: TimeoutOpt = None, interval: IntervalOpt = 0.5,
    kubeconfig: KubeconfigOpt = None, context: ContextOpt = None, namespace: NamespaceOpt = None,
) -> None:
    """Follow a run: phase changes, segments, waitpoints and the final result.

    Exits 0 when the run succeeds or waits for an answer, 4 when it fails or is cancelled,
    5 at --timeout, 130 on Ctrl-C.
    """
    kube = _connect(kubeconfig, context, namespace)
    code = _watcher(kube, _out(), timeout, interval, until_done=until_done).watch(name)
    raise typer.Exit(code)


@app.command("transcript")
def transcript_(
    name: Annotated[str, typer.Argument(metavar="SESSION|RUN", help="A run (one turn) or a session (every turn, "
                                        "in order).", show_default=False)],
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Then print steps as they happen (watch API) "
                                         "until the run ends or waits.")] = False,
    output: Annotated[str | None, typer.Option("-o", "--output", help="json or yaml (default: one line per step).",
                                               show_default=False)] = None,
    timeout: TimeoutOpt = None,
    kubeconfig: KubeconfigOpt = None, context: ContextOpt = None, namespace: NamespaceOpt = None,
) -> None:
    """Show what the agent did: messages, steers, tool calls, decisions, results, questions,
    answers, children, waits and the final answer with usage."""
    if output not in (None, "json", "yaml"):
        raise typer.BadParameter(f"-o/--output must be json or yaml, not {output!r}", param_hint="-o")
    if follow and output:
        raise typer.BadParameter("--follow prints lines; it cannot be combined with -o", param_hint="--follow")
    kube = _connect(kubeconfig, context, namespace)
    if follow:
        raise typer.Exit(transcript.follow(kube, _out(), name, timeout=timeout))
    raise typer.Exit(transcript.show(kube, _out(), name, output))


def main() -> None:
    app(prog_name=PROG)


if __name__ == "__main__":
    main()

__all__ = ["EXIT_OK", "app", "main"]
