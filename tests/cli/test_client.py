"""Kubeconfig, context and namespace resolution, as kubectl does it (no API calls)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from sessionops.cli.client import connect, context_namespace, kubeconfig_path
from sessionops.cli.errors import CliError


def write_kubeconfig(path: Path, contexts: dict[str, str | None], current: str) -> Path:
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:1"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": n, "context": {"cluster": "c", "user": "u", **({"namespace": ns} if ns else {})}}
                     for n, ns in contexts.items()],
        "current-context": current}))
    return path


def test_kubeconfig_path_precedence(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KUBECONFIG", f"{tmp_path}/a{os.pathsep}{tmp_path}/b")
    assert kubeconfig_path(tmp_path / "x") == str(tmp_path / "x")
    assert kubeconfig_path() == f"{tmp_path}/a{os.pathsep}{tmp_path}/b"
    monkeypatch.delenv("KUBECONFIG")
    assert kubeconfig_path() == str(Path("~/.kube/config").expanduser())


def test_namespace_comes_from_the_flag_then_the_context_then_default(tmp_path: Path) -> None:
    config = write_kubeconfig(tmp_path / "kc", {"dev": "team-a", "bare": None}, current="dev")
    assert context_namespace(str(config), None) == "team-a"
    assert context_namespace(str(config), "bare") is None
    kube = connect(config)
    assert (kube.namespace, kube.namespace_explicit) == ("team-a", False)
    assert connect(config, context="bare").namespace == "default"
    kube = connect(config, namespace="other")
    assert (kube.namespace, kube.namespace_explicit) == ("other", True)
    assert kube.api.api_client.configuration.host == "http://127.0.0.1:1"


def test_kubeconfig_env_with_several_files_is_merged(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    first = write_kubeconfig(tmp_path / "one", {"dev": "team-b"}, current="dev")
    monkeypatch.setenv("KUBECONFIG", f"{tmp_path / 'missing'}{os.pathsep}{first}")
    assert connect().namespace == "team-b"


def test_kubeconfig_problems_are_one_line_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(CliError, match="not found"):
        connect(tmp_path / "nope")
    config = write_kubeconfig(tmp_path / "kc", {"dev": "team-a"}, current="dev")
    with pytest.raises(CliError, match='context "prod" not found \\(contexts: dev\\)'):
        connect(config, context="prod")
    (tmp_path / "empty").write_text("")
    with pytest.raises(CliError, match="^kubeconfig: "):
        connect(tmp_path / "empty")
