"""MCP servers over streamable HTTP: a real FastMCP server in this process on 127.0.0.1.

The loader and its synchronous wrapper are tested directly (fake API server answers);
the worker end to end through the harness (``Stack``: the pod runner's real worker
subprocesses reach the server over HTTP).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import ipaddress
import json
import logging
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import uvicorn
from mcp.server.fastmcp import Context, FastMCP

from sessionops.api.config import McpEgress
from sessionops.api.snapshot import McpServer, SecretHeaders
from sessionops.policy.egress import Policy
from sessionops.worker.access import Access
from sessionops.worker.mcp import McpTools, server_connections
from tests.worker.harness import ALICE, MCP_HEADER_SECRETS, NS, Stack

TOKEN = "calc-token-s3cret"
HEADER = "X-Calc-Token"
SECRET = MCP_HEADER_SECRETS[0]


@dataclasses.dataclass
class Calc:
    url: str
    tokens: list[str | None] = dataclasses.field(default_factory=list)
    """The header of each ``add`` call, in order."""


def _calc_app(calc: Calc) -> Any:
    server = FastMCP("calc", host="127.0.0.1", log_level="WARNING")

    @server.tool()
    def add(a: int, b: int, ctx: Context) -> int:
        """Add two integers."""
        request = ctx.request_context.request
        token = request.headers.get(HEADER) if request is not None else None
        calc.tokens.append(token)
        if token != TOKEN:
            raise ValueError(f"missing or wrong {HEADER}")
        return a + b

    return server.streamable_http_app()


@pytest.fixture(scope="module")
def calc() -> Iterator[Calc]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    calc = Calc(url=f"http://127.0.0.1:{sock.getsockname()[1]}/mcp")
    server = uvicorn.Server(uvicorn.Config(_calc_app(calc), log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="calc-mcp", daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the MCP server did not start"
        time.sleep(0.02)
    try:
        yield calc
    finally:
        server.should_exit = True
        thread.join(5)
        sock.close()


@pytest.fixture(autouse=True)
def _clear(calc: Calc) -> None:
    calc.tokens.clear()


class FakeKube:
    """The two API calls the loader makes: Secrets and SubjectAccessReviews."""

    def __init__(self, secrets: dict[str, dict[str, str]], denied: set[str] = frozenset()) -> None:
        self.secrets = secrets
        self.denied = denied
        self.secret_reads: list[str] = []

    def secret_data(self, namespace: str, name: str) -> dict[str, str] | None:
        self.secret_reads.append(name)
        return self.secrets.get(name)

    def access_review(self, spec: dict[str, Any]) -> tuple[bool, str]:
        attrs = spec["resourceAttributes"]
        return attrs["name"] not in self.denied, "denied by the test"


def _server(name: str, url: str, secret: str | None = SECRET) -> McpServer:
    return McpServer(name=name, url=url, headers_from=SecretHeaders(secret_name=secret) if secret else None)


def _load(mcp: McpTools, kube: FakeKube, *servers: McpServer) -> list[Any]:
    access = Access(kube, NS, [ALICE])  # type: ignore[arg-type]
    return mcp.load(server_connections(list(servers), access=access, kube=kube, namespace=NS))  # type: ignore[arg-type]


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") if isinstance(b, dict) else str(b) for b in content)


def test_loaded_tool_is_renamed_synchronous_and_sends_the_secret_headers(calc: Calc) -> None:
    kube = FakeKube({SECRET: {HEADER: TOKEN + "\n"}})
    with McpTools() as mcp:
        [tool] = _load(mcp, kube, _server("calc", calc.url))

        assert tool.name == "calc__add" and "Add two integers" in tool.description
        assert set(tool.args) == {"a", "b"}
        assert _text(tool.invoke({"a": 2, "b": 3})) == "5"
        # As the graph calls it: from worker threads, in parallel, with a tool call.
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            results = list(pool.map(lambda i: tool.invoke({"a": i, "b": 1}), range(4)))
        assert [_text(r) for r in results] == ["1", "2", "3", "4"]
        message = tool.invoke({"type": "tool_call", "id": "c1", "name": "calc__add", "args": {"a": 1, "b": 1}})
        assert _text(message.content) == "2" and message.status == "success"

        # Also when the calling thread runs an event loop of its own: no nested asyncio.run.
        async def inside_a_loop() -> Any:
            return tool.invoke({"a": 20, "b": 22})

        assert _text(asyncio.run(inside_a_loop())) == "42"
    assert calc.tokens == [TOKEN] * 7
    assert kube.secret_reads == [SECRET]


def test_headers_are_read_at_load_time_and_an_mcp_error_is_a_tool_error_result(calc: Calc) -> None:
    kube = FakeKube({SECRET: {HEADER: "wrong"}})
    with McpTools() as mcp:
        [tool] = _load(mcp, kube, _server("calc", calc.url))
        message = tool.invoke({"type": "tool_call", "id": "c1", "name": "calc__add", "args": {"a": 1, "b": 1}})
    assert message.status == "error" and f"wrong {HEADER}" in _text(message.content)
    assert calc.tokens == ["wrong"]


def test_unreachable_missing_secret_and_denied_servers_are_left_out(
        calc: Calc, caplog: pytest.LogCaptureFixture) -> None:
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    dead_url = f"http://127.0.0.1:{closed.getsockname()[1]}/mcp"  # bound, never listening: refused
    kube = FakeKube({SECRET: {HEADER: TOKEN}}, denied={"denied"})
    caplog.set_level(logging.INFO, logger="sessionops.worker.mcp")
    started = time.monotonic()
    with McpTools(load_timeout=5) as mcp:
        tools = _load(mcp, kube, _server("dead", dead_url), _server("nosecret", calc.url, secret="absent"),
                      _server("denied", calc.url, secret="denied-secret"), _server("calc", calc.url))
    closed.close()

    assert [t.name for t in tools] == ["calc__add"]
    assert time.monotonic() - started < 5
    assert "denied-secret" not in kube.secret_reads  # a denied server's Secret is never read
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("dead" in w and "unreachable" in w for w in warnings)
    assert any("nosecret" in w and "absent" in w for w in warnings)
    assert TOKEN not in caplog.text


class Resolver:
    """The pod's DNS, played: names of the test resolve to what the table says."""

    def __init__(self, table: dict[str, str]) -> None:
        self.table = table
        self.lookups: list[str] = []

    async def __call__(self, host: str, port: int) -> list[Any]:
        self.lookups.append(host)
        return [ipaddress.ip_address(self.table[host])]


def test_a_name_resolving_to_the_metadata_endpoint_is_refused_at_connection_and_an_allowed_one_works(
        calc: Calc, caplog: pytest.LogCaptureFixture) -> None:
    """Admission cannot see what a name will resolve to in the pod: the worker checks every
    resolved address when it connects, and connects to the address it checked."""
    port = calc.url.split(":")[2].split("/")[0]
    # "localhost": a name the calc server accepts in the Host header (FastMCP's own rebinding guard).
    dns = Resolver({"localhost": "127.0.0.1", "metadata-alias.test": "169.254.169.254"})
    kube = FakeKube({SECRET: {HEADER: TOKEN}})
    access = Access(kube, NS, [ALICE])  # type: ignore[arg-type]
    servers = [_server("calc", f"http://localhost:{port}/mcp"), _server("meta", f"http://metadata-alias.test:{port}/mcp"),
               _server("literal", "http://169.254.169.254/latest")]
    caplog.set_level(logging.INFO, logger="sessionops.worker.mcp")
    with McpTools(load_timeout=5) as mcp:
        connections = server_connections(servers, access=access, kube=kube, namespace=NS,  # type: ignore[arg-type]
                                         egress=Policy(), resolver=dns)
        assert set(connections) == {"calc", "meta"}  # the literal is refused as written, never tried
        tools = mcp.load(connections)
        assert [t.name for t in tools] == ["calc__add"]
        assert _text(tools[0].invoke({"a": 2, "b": 3})) == "5"
    assert "metadata-alias.test" in dns.lookups and calc.tokens == [TOKEN]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("meta is unreachable" in w and "metadata-alias.test resolves to 169.254.169.254 is a link-local "
               "address" in w for w in warnings), warnings
    assert any("literal left out" in w and "169.254.169.254 is a link-local address" in w for w in warnings), warnings
    # The operator's allow-list widens it: the same name, allowed by network, connects (here to the calc
    # server, which the table puts there for the test).
    allowed = Policy.of(McpEgress(allowed_cidrs=["127.0.0.0/8"]), {})
    api = Policy.of(McpEgress(), {"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": port})
    with McpTools(load_timeout=5) as mcp:
        refused = mcp.load(server_connections(servers[:1], access=access, kube=kube, namespace=NS,  # type: ignore[arg-type]
                                              egress=api, resolver=dns))
        widened = mcp.load(server_connections(servers[:1], access=access, kube=kube, namespace=NS,  # type: ignore[arg-type]
                                              egress=Policy(allowed_networks=allowed.allowed_networks,
                                                            api_server=api.api_server), resolver=dns))
    assert refused == [] and "is the cluster's API server" in caplog.text
    assert [t.name for t in widened] == ["calc__add"]


def test_a_server_failing_mid_turn_gives_an_error_result_not_a_failed_turn() -> None:
    from langchain_mcp_adapters.tools import convert_mcp_tool_to_langchain_tool
    from mcp.types import Tool

    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    connection = {"transport": "streamable_http", "url": f"http://127.0.0.1:{closed.getsockname()[1]}/mcp",
                  "headers": {HEADER: TOKEN}}
    schema = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}
    adapted = convert_mcp_tool_to_langchain_tool(None, Tool(name="add", inputSchema=schema),
                                                 connection=connection)  # type: ignore[arg-type]
    with McpTools(call_timeout=5) as mcp:
        tool = mcp.sync_tool(adapted, "gone__add", "gone")
        message = tool.invoke({"type": "tool_call", "id": "c1", "name": "gone__add", "args": {"a": 1, "b": 1}})
    closed.close()
    assert message.status == "error" and "MCP server 'gone' failed" in _text(message.content)
    assert TOKEN not in _text(message.content)


# End to end: the worker (a subprocess) reaches the server over HTTP.

def _mcp_session(stack: Stack, calc: Calc) -> None:
    stack.session("s1", stack.snapshot("mcp-add", mcp_servers=[_server("calc", calc.url)]))
    stack.message("s1-i1", "s1", "What is 2 + 3?")
    stack.turn("s1-t1", "s1", ["s1-i1"])
    # Created after the snapshot was frozen: headers are read when the segment runs.
    stack.kube.request("POST", f"/api/v1/namespaces/{NS}/secrets",
                       body={"metadata": {"name": SECRET}, "stringData": {HEADER: TOKEN}})


def _tool_results(request: dict[str, Any]) -> dict[str, str]:
    return {m["tool_call_id"]: _text(m["content"]) for m in request["messages"] if m.get("role") == "tool"}


def test_worker_calls_an_mcp_tool_and_succeeds_with_its_result(stack: Stack, calc: Calc) -> None:
    _mcp_session(stack, calc)

    run, execution = stack.segment("s1-t1")

    assert execution.exit_code == 0
    assert run["status"]["phase"] == "Succeeded"
    assert run["status"]["result"]["text"] == "2 + 3 is 5."
    assert calc.tokens == [TOKEN]
    requests = stack.requests("mcp-add")
    assert "calc__add" in requests[0]["tools"]
    assert _tool_results(requests[-1]) == {"call_mcp-add_0_0": "5"}
    [result] = [m for m in stack.thread("s1").values["messages"] if m.type == "tool"]
    assert (result.name, _text(result.content), result.status) == ("calc__add", "5", "success")
    assert TOKEN not in execution.output()


def test_denied_mcp_server_is_hidden_and_its_call_refused(stack: Stack, calc: Calc) -> None:
    # alice may use the Agent, its tools and skills, but no MCP server.
    stack.restrict_alice([
        {"apiGroups": ["sessionops.dev"], "resources": ["agents"], "verbs": ["get"]},
        {"apiGroups": ["sessionops.dev"], "resources": ["tools", "skills"], "verbs": ["use"]}])
    _mcp_session(stack, calc)

    run, _ = stack.segment("s1-t1")

    assert run["status"]["phase"] == "Succeeded"
    requests = stack.requests("mcp-add")
    assert all("calc__add" not in r["tools"] for r in requests) and "read_file" in requests[0]["tools"]
    assert "not available" in _tool_results(requests[-1])["call_mcp-add_0_0"]
    assert calc.tokens == []  # the server never saw the call


def test_mcp_header_values_are_redacted_from_the_transcript(stack: Stack, calc: Calc) -> None:
    stack.session("s1", stack.snapshot("mcp-add", mcp_servers=[_server("calc", calc.url)]))
    stack.message("s1-i1", "s1", f"What is 2 + 3? My token is {TOKEN}.")
    stack.turn("s1-t1", "s1", ["s1-i1"])
    stack.kube.request("POST", f"/api/v1/namespaces/{NS}/secrets",
                       body={"metadata": {"name": SECRET}, "stringData": {HEADER: TOKEN}})

    run, execution = stack.segment("s1-t1")

    assert run["status"]["phase"] == "Succeeded"
    steps = stack.transcript("s1-t1")
    assert steps[0] == {**steps[0], "kind": "UserMessage", "text": "What is 2 + 3? My token is [REDACTED]."}
    assert TOKEN not in json.dumps(steps)
    assert TOKEN not in execution.output()
