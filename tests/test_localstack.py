"""`make dev`, `make demo` and `make dev-down` as a new user runs them, and the demo's printed
commands as a reader pastes them (a shell with only the environment the demo prints)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests import pgserver
from tests.localstack import DEMO_KEY_SECRET, DemoModel, demo_model
from tests.stack import ROOT
from tests.test_pgserver import modes

TRY_IT = "Try it yourself: paste these lines into a shell"
# A reader's shell: no kubectl, helm or plugin on the PATH and no KUBECONFIG until the printed lines set them.
BARE_PATH = "/usr/bin:/bin"


def run(command: str, dev: Path, *, fresh: bool = False, **env: str) -> subprocess.CompletedProcess:
    """``fresh``: as on a fresh machine, without DATABASE_URL (the stack starts its embedded server)."""
    inherited = {k: v for k, v in os.environ.items() if not (fresh and k == "DATABASE_URL")}
    return subprocess.run([sys.executable, "-m", "tests.localstack", command], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, env={**inherited, "SESSIONOPS_DEV_DIR": str(dev), **env})


def paste(lines: list[str], timeout: float = 300) -> subprocess.CompletedProcess:
    """Runs lines as a person pasting them would: one shell, stopping at the first failure."""
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"} | {"PATH": BARE_PATH}
    return subprocess.run(["bash", "-e", "-c", "\n".join(lines)], cwd="/", capture_output=True, text=True,
                          timeout=timeout, env=env)


def printed_block(output: str, header: str) -> list[str]:
    """The indented lines after `header`, up to the first blank line."""
    lines = output.split(header, 1)[1].splitlines()[1:]
    block = []
    for line in lines:
        if not line.strip():
            break
        assert line.startswith("  "), line
        block.append(line[2:])
    return block


def logs(dev: Path) -> str:
    return "".join(f"\n--- {p.name}\n{p.read_text()[-3000:]}" for p in dev.glob("*.log"))


def assert_stopped(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            continue
        raise AssertionError(f"process {pid} still runs after dev-down")


def test_demo_converses_and_every_printed_command_runs_when_pasted(tmp_path: Path) -> None:
    dev, mine = tmp_path / "dev", tmp_path / "scenarios"
    mine.mkdir()
    (mine / "mine.yaml").write_text("responses: [{content: 'my own scenario answers'}]\n")
    pids: list[int] = []
    outside = modes([ROOT, dev.parent, Path(tempfile.gettempdir())])
    try:
        up = run("up", dev, fresh=True, SESSIONOPS_REPLAY_DIRS=str(mine))
        assert up.returncode == 0, up.stdout + up.stderr + logs(dev)
        assert "replay/mine" in up.stdout and "default model (the demo session's): replay/assistant" in up.stdout
        assert "embedded PostgreSQL at postgresql://" in up.stdout
        postgres = pgserver.Server.load(dev / "postgres")
        assert postgres is not None and postgres.postmaster_pid() is not None
        pids = [int(line.split()[1]) for line in (dev / "pids").read_text().splitlines()]
        pids.append(postgres.postmaster_pid())
        assert "already running" in run("up", dev, fresh=True).stdout

        demo = run("demo", dev, fresh=True)
        assert demo.returncode == 0, demo.stdout + demo.stderr + logs(dev)
        out = demo.stdout
        assert 'You said: "Hello! What can you do?"' in out  # examples/03-input.yaml, applied with kubectl
        assert "Approval needed" in out and "run_shell returned: exit code 0\nhello from the shell" in out
        assert "cleanup steps: MergeCompletedTasks, AddCancellationResults, ClearTasks" in out
        assert "Paused" in out and "continue sent for session demo" in out
        # The transcripts of the approved and of the cancelled turn (issue 13, item 4).
        approved = out.split("What the agent did in that turn", 1)[1].split("Now a turn cancelled", 1)[0]
        assert "run_shell" in approved and "by alice" in approved, approved
        cancelled = out.split("The cancelled turn's transcript", 1)[1].split("The queue stays paused", 1)[0]
        assert "cancelled" in cancelled.split("\n$ ", 1)[1], cancelled
        for cue in ("note", "shell", "question", "delegate"):
            assert f"\n  {cue} " in out, f"cue word {cue} is documented in the demo output"
        setup = printed_block(out, "Every command below runs as printed in a shell set up with:")
        assert setup[1] == f"export KUBECONFIG={dev / 'kubeconfig'}"

        pasted = paste(printed_block(out, TRY_IT))
        assert pasted.returncode == 0, pasted.stdout + pasted.stderr
        for answer in ("Saved to notes.txt. Reading it back gives: Take a note: the demo works.",
                       '"answer": "green"', "was cancelled", "continue sent for session demo",
                       'The child session answered: You said: "Say hello to the session that started you."'):
            assert answer in pasted.stdout, pasted.stdout

        # The demo session keeps answering, and the user's own scenario is a catalog model.
        more = paste([*setup, *(f'kubectl sessionops send demo "message {i}" --watch' for i in range(5)),
                      "kubectl apply -f - <<'EOF'",
                      "{apiVersion: sessionops.dev/v1alpha1, kind: AgentSession, metadata: {name: mine},",
                      " spec: {agentRef: {name: helper}, model: replay/mine}}",
                      "EOF",
                      'kubectl sessionops send mine "hello, my scenario" --watch'])
        assert more.returncode == 0, more.stdout + more.stderr
        for i in range(5):
            assert f'You said: "message {i}"' in more.stdout
        assert "my own scenario answers" in more.stdout
    finally:
        down = run("down", dev, fresh=True)
    assert down.returncode == 0 and not (dev / "pids").exists()
    assert "stopped the embedded PostgreSQL" in down.stdout and not (dev / "postgres" / pgserver.STATE).exists()
    assert_stopped(pids)
    assert postgres.private or (dev / "postgres" / "data" / "PG_VERSION").exists(), "a user's data stays in .dev"
    assert not postgres.private or not postgres.runtime.exists(), "root's private server directory is removed"
    assert modes([ROOT, dev.parent, Path(tempfile.gettempdir())]) == outside, "no permission changed outside"


@pytest.mark.parametrize(("env", "expected"), [
    ({}, DemoModel("replay/assistant")),
    ({"SESSIONOPS_DEMO_MODEL": "replay/hello"}, DemoModel("replay/hello")),
    ({"SESSIONOPS_DEMO_MODEL": "openai/gpt-4o-mini", "OPENAI_API_KEY": "sk-1"},
     DemoModel("openai/gpt-4o-mini", {"name": "openai/gpt-4o-mini", "provider": "openai", "model": "gpt-4o-mini",
                                      "endpoint": "https://api.openai.com/v1",
                                      "secretKeyRef": {"name": DEMO_KEY_SECRET, "key": "api-key"}}, "sk-1")),
], ids=["default: the demo assistant", "another scenario", "openai with the default endpoint"])
def test_the_demo_model_is_read_from_the_environment(env: dict, expected: DemoModel) -> None:
    assert demo_model(env) == expected
    assert "sk-1" not in repr(demo_model(env))


@pytest.mark.parametrize(("env", "message"), [
    ({"SESSIONOPS_DEMO_MODEL": "openai/gpt-4o-mini"}, "OPENAI_API_KEY is not set"),
    ({"SESSIONOPS_DEMO_MODEL": "gpt-4o-mini", "OPENAI_API_KEY": "sk-1"}, "expected openai/<model>"),
    ({"SESSIONOPS_DEMO_MODEL": "openai/", "OPENAI_API_KEY": "sk-1"}, "expected openai/<model>"),
], ids=["no key", "no provider", "no model"])
def test_a_bad_demo_model_setting_is_one_line_naming_the_variable(env: dict, message: str) -> None:
    with pytest.raises(SystemExit) as caught:
        demo_model(env)
    assert str(caught.value).startswith("SESSIONOPS_DEMO_MODEL=") and message in str(caught.value)


def test_up_with_a_bad_demo_model_stops_before_starting_anything(tmp_path: Path) -> None:
    env = {"SESSIONOPS_DEMO_MODEL": "openai/gpt-4o-mini", "OPENAI_API_KEY": ""}
    up = run("up", tmp_path / "dev", **env)
    assert up.returncode == 1 and up.stdout == ""
    assert up.stderr.strip().splitlines() == [
        "SESSIONOPS_DEMO_MODEL=openai/gpt-4o-mini: OPENAI_API_KEY is not set; export the model's API key "
        "(OPENAI_BASE_URL optionally names an OpenAI-compatible endpoint)"]
    assert not (tmp_path / "dev").exists()


def test_demo_without_a_stack_or_with_another_demo_model_says_what_to_do(tmp_path: Path) -> None:
    dev = tmp_path / "dev"
    missing = run("demo", dev)
    assert missing.returncode == 1
    assert missing.stderr.strip() == "the local stack is not running: start it with `make dev` (or `make demo`)"
    dev.mkdir()
    (dev / "env").write_text(f"KUBECONFIG={dev / 'kubeconfig'}\nSESSIONOPS_REPLAY_URL=http://127.0.0.1:1\n"
                             "DATABASE_URL=postgresql://x\nSESSIONOPS_DEMO_MODEL=replay/assistant\n")
    other = run("demo", dev, SESSIONOPS_DEMO_MODEL="openai/gpt-4o-mini")
    assert other.returncode == 1 and other.stdout == ""
    assert other.stderr.strip() == ("SESSIONOPS_DEMO_MODEL=openai/gpt-4o-mini, but the running local stack was "
                                    "started with replay/assistant: run `make dev-down`, then `make demo` again")
