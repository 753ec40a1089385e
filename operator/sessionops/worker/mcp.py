"""MCP servers over streamable HTTP: their tools, usable from the synchronous graph.

For each ``snapshot.mcp_servers`` entry the turn's identities may use now (``use`` on
``mcpservers`` named after the server, see ``access``), the worker reads the headers from
the Secret named by ``headersFrom.secretName`` in the run's namespace (at execution time,
never frozen), lists the server's tools with langchain-mcp-adapters and exposes each as
``<server>__<tool>``.

MCP tools are async-only while the worker runs ``graph.invoke``: ``McpTools`` owns one
background event loop thread for the segment's lifetime, and every tool is wrapped as a
synchronous ``StructuredTool`` whose function runs the MCP call on that loop and waits for
it (safe from the graph's worker threads, never a nested ``asyncio.run``).

A server that cannot be used (unreachable, its Secret missing, a timeout) is left out:
its tools are absent, the turn goes on, and a warning names the server and the error
type only (never headers, URLs or Secret values). A call that fails at the transport
level returns an error result to the model instead of failing the turn. Access is
re-checked per call by the agent's ``ToolAccessMiddleware`` (``tool_filter``), so a
revocation during the segment hides the tools and refuses their calls.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import re
import threading
from collections.abc import Coroutine, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from langchain_core.tools import BaseTool, StructuredTool, ToolException

from sessionops.api.snapshot import McpServer
from sessionops.platform.errors import ApiException
from sessionops.platform.worker_kube import WorkerKube
from sessionops.policy.egress import Policy
from sessionops.worker.access import MCP_SEPARATOR, Access, mcp_server_check
from sessionops.worker.egress import EgressRefused, Resolver, client_factory, resolve

if TYPE_CHECKING:
    from langchain_mcp_adapters.sessions import StreamableHttpConnection

# langchain-mcp-adapters (and the mcp SDK) are imported only when a turn has MCP servers:
# importing them costs the worker about a second of start-up.

logger = logging.getLogger("sessionops.worker.mcp")

T = TypeVar("T")

LOAD_TIMEOUT = 15.0
"""Seconds to connect to a server and list its tools before it counts as unreachable."""
CALL_TIMEOUT = 300.0
"""Seconds one tool call may take, end to end."""
HTTP_TIMEOUT = 30.0
"""Seconds per HTTP request to a server (the SSE read timeout is ``CALL_TIMEOUT``)."""
TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
"""What model APIs accept as a function name; MCP tools named otherwise are left out."""


def describe(error: BaseException) -> str:
    """Exception type names only (leaves of exception groups): messages may carry URLs or headers.
    An egress refusal keeps its message (host and reason, written by us)."""
    if isinstance(error, BaseExceptionGroup):
        return ", ".join(sorted({describe(e) for e in error.exceptions}))
    cause: BaseException | None = error
    while cause is not None:
        if isinstance(cause, EgressRefused):  # our own words: the host and the reason, no secrets
            return f"{type(error).__name__}: {cause}"
        cause = cause.__cause__
    return type(error).__name__


def server_connections(servers: Sequence[McpServer], *, access: Access, kube: WorkerKube,
                       namespace: str, egress: Policy | None = None,
                       resolver: Resolver = resolve) -> dict[str, StreamableHttpConnection]:
    """Connections of the servers the turn may use now, headers read from their Secrets.

    Denied servers are skipped without reading their Secret. A URL the egress policy refuses
    as written leaves its server out (warning with the reason); the others connect through
    ``sessionops.worker.egress``, which checks every resolved address at connection time. A
    missing or unreadable (403) Secret leaves the server out with a warning; other API errors
    propagate (infrastructure: the operator retries the segment).
    """
    egress = egress or Policy()
    connections: dict[str, StreamableHttpConnection] = {}
    answers = access.answers(mcp_server_check(server.name) for server in servers)
    for server in servers:
        allowed, why = answers[mcp_server_check(server.name)]
        if not allowed:
            logger.info("MCP server %s is not available: %s", server.name, why)
            continue
        if (problem := egress.url_problem(server.url)) is not None:
            logger.warning("MCP server %s left out: its URL is refused: %s", server.name, problem)
            continue
        headers: dict[str, str] = {}
        if server.headers_from is not None:
            secret = server.headers_from.secret_name
            try:
                data = kube.secret_data(namespace, secret)
            except ApiException as e:
                if e.status != 403:
                    raise
                data = None
            except ValueError:  # not base64 / not UTF-8: unusable as headers
                data = None
            if data is None:
                logger.warning("MCP server %s left out: its headers Secret %s is missing, not readable or not text",
                               server.name, secret)
                continue
            headers = {k: v.strip() for k, v in data.items()}
        connection: StreamableHttpConnection = {
            "transport": "streamable_http", "url": server.url, "timeout": HTTP_TIMEOUT,
            "sse_read_timeout": CALL_TIMEOUT, "httpx_client_factory": client_factory(egress, resolver=resolver)}
        if headers:
            connection["headers"] = headers
        connections[server.name] = connection
    return connections


def _tool_error(error: ToolException) -> Any:
    """An MCP error result keeps its content; our own transport errors become their message."""
    from langchain_mcp_adapters.tools import _handle_mcp_tool_error, _MCPToolExecutionError

    if isinstance(error, _MCPToolExecutionError):
        return _handle_mcp_tool_error(error)
    return str(error)


class McpTools:
    """The segment's MCP tools and the background event loop they run on.

    Use as a context manager around the graph's whole use: closing stops the loop, after
    which the tools fail. The loop thread starts on first use (no MCP, no thread).
    """

    def __init__(self, *, load_timeout: float = LOAD_TIMEOUT, call_timeout: float = CALL_TIMEOUT) -> None:
        self.load_timeout = load_timeout
        self.call_timeout = call_timeout
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def __enter__(self) -> McpTools:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name="mcp-loop", daemon=True)
                thread.start()
                self._loop, self._thread = loop, thread
            return self._loop

    def run(self, coroutine: Coroutine[Any, Any, T], timeout: float) -> T:
        """Run ``coroutine`` on the background loop and wait for it (from any thread but the loop's)."""
        future = asyncio.run_coroutine_threadsafe(coroutine, self._running_loop())
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise

    def close(self) -> None:
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or thread is None:
            return

        async def shutdown() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await loop.shutdown_asyncgens()

        try:
            asyncio.run_coroutine_threadsafe(shutdown(), loop).result(5)
        except Exception:  # noqa: BLE001  (best effort: the thread is a daemon)
            logger.debug("MCP loop shutdown incomplete", exc_info=True)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        if not thread.is_alive():
            loop.close()

    def load(self, connections: dict[str, StreamableHttpConnection]) -> list[BaseTool]:
        """The servers' tools as synchronous ``<server>__<tool>`` tools; unreachable servers
        contribute none (warning logged)."""
        if not connections:
            return []
        from langchain_mcp_adapters.client import MultiServerMCPClient


        async def load_one(name: str, connection: StreamableHttpConnection) -> list[BaseTool]:
            client = MultiServerMCPClient({name: connection})
            return await asyncio.wait_for(client.get_tools(server_name=name), self.load_timeout)

        async def load_all() -> list[list[BaseTool] | BaseException]:
            return await asyncio.gather(*(load_one(n, c) for n, c in connections.items()), return_exceptions=True)

        try:
            results = self.run(load_all(), self.load_timeout + 5)
        except TimeoutError:  # a connection that would not even cancel: treat all as unreachable
            logger.warning("MCP servers %s did not answer in time, their tools are left out", ", ".join(connections))
            return []
        tools: list[BaseTool] = []
        for name, result in zip(connections, results, strict=True):
            if isinstance(result, BaseException):
                logger.warning("MCP server %s is unreachable, its tools are left out: %s", name, describe(result))
                continue
            seen: set[str] = set()
            for tool in result:
                full = f"{name}{MCP_SEPARATOR}{tool.name}"
                if not TOOL_NAME.match(full) or full in seen:
                    logger.warning("MCP server %s: tool %r left out (invalid or duplicate name)", name, tool.name)
                    continue
                seen.add(full)
                tools.append(self.sync_tool(tool, full, name))
        logger.info("MCP tools loaded: %s", ", ".join(t.name for t in tools) or "none")
        return tools

    def sync_tool(self, tool: BaseTool, name: str, server: str) -> StructuredTool:
        """``tool`` (async-only, from langchain-mcp-adapters) as a synchronous tool named ``name``."""
        coroutine = getattr(tool, "coroutine", None)
        if coroutine is None:
            raise TypeError(f"MCP tool {tool.name!r} has no coroutine")

        def call(**arguments: Any) -> Any:
            try:
                return self.run(coroutine(**arguments), self.call_timeout)
            except ToolException:
                raise
            except Exception as e:
                logger.warning("MCP tool %s failed: %s", name, describe(e))
                raise ToolException(f"MCP server {server!r} failed: {describe(e)}") from e

        return StructuredTool(
            name=name, description=tool.description, args_schema=tool.args_schema, func=call,
            response_format=getattr(tool, "response_format", "content"), metadata=tool.metadata,
            handle_tool_error=_tool_error,
        )
