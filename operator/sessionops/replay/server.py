"""The replay model's HTTP server (aiohttp), speaking OpenAI chat completions.

Routes:
    POST   /v1/chat/completions (also /chat/completions)   the model
    GET    /v1/models (also /models)                       scenarios as `replay/<name>`
    GET    /requests[?scenario=name]                       recorded requests, oldest first,
                                                           with the bearer key each presented
    DELETE /requests                                       forget them
    GET    /scenarios, POST /scenarios                     list / register (replaces by name)
    GET    /healthz

The answer comes from the scenario's branch whose `match` occurs in the request's first
user message, or its main line; for a scenario with `turns`, from the turn whose cue
occurs in the latest user message (`protocol.select_answer`). Each record names the
scenario, the `branch` (its index, or null for the main line) and the `turn`.

With `api_key` set, a chat completion without `Authorization: Bearer <api_key>` gets a
401 (`code: invalid_api_key`), as from OpenAI.

A request past the end of its conversation gets a 400 (`code: scenario_exhausted`)
unless it sets `fallbackContent`: running out of script is a test failure, not an
answer to guess.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from datetime import UTC, datetime
from typing import Any

import yaml
from aiohttp import web

from sessionops.replay import protocol
from sessionops.replay.history import HistoryError, count_assistant_messages, validate_history
from sessionops.replay.scenarios import Scenario, ScenarioError, load_scenario_dirs, parse_scenario

logger = logging.getLogger("sessionops.replay")

MODEL_PREFIX = "replay/"
SERVER_KEY: web.AppKey[ReplayServer] = web.AppKey("replay_server")


def _error(
    status: int,
    message: str,
    *,
    type: str = "invalid_request_error",
    code: str | None = None,
    param: str | None = None,
) -> web.Response:
    return web.json_response(protocol.error_body(message, type=type, code=code, param=param), status=status)


STOP_GRACE_SECONDS = 1.0


def _bearer(request: web.Request) -> str | None:
    """The bearer token the request presents, recorded so tests can tell which key arrived."""
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    return (token.strip() or None) if scheme.lower() == "bearer" else None


class ReplayServer:
    """Scenarios, the request record and the aiohttp application serving them.

    Use `async with ReplayServer(dirs=[...]) as server: server.url`, or `start()` /
    `stop()`. Port 0 picks a free port; `url` has the one chosen.
    """

    def __init__(
        self,
        scenarios: Iterable[Scenario] = (),
        *,
        dirs: Iterable[str | os.PathLike[str]] = (),
        host: str = "127.0.0.1",
        port: int = 0,
        max_records: int = 10_000,
        api_key: str | None = None,
    ) -> None:
        # When set, chat completions require `Authorization: Bearer <api_key>` (a stand-in
        # for a real provider: proves a client sends the key it was given).
        self.api_key = api_key
        self.scenarios: dict[str, Scenario] = load_scenario_dirs(dirs)
        for scenario in scenarios:
            self.scenarios[scenario.name] = scenario
        self.host, self.port = host, port
        # Bounded, so a long-running demo server does not grow without limit.
        self.records: deque[dict[str, Any]] = deque(maxlen=max_records)
        self._seq = 0
        self.runner: web.AppRunner | None = None
        self.url: str | None = None
        self.app = self._make_app()

    def add(self, scenario: Scenario) -> None:
        """Registers a scenario, replacing one with the same name."""
        self.scenarios[scenario.name] = scenario

    def resolve(self, model: str) -> Scenario | None:
        """`replay/<name>` or `<name>` -> the scenario."""
        return self.scenarios.get(model.removeprefix(MODEL_PREFIX))

    async def start(self) -> str:
        # Stopping does not wait for delayed answers still in flight (a cancelled turn's
        # worker is gone; its request may sleep for a minute).
        self.runner = web.AppRunner(self.app, access_log=None, shutdown_timeout=STOP_GRACE_SECONDS)
        await self.runner.setup()
        site = web.TCPSite(self.runner, self.host, self.port)
        await site.start()
        host, port = self.runner.addresses[0][:2]
        self.url = f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
        return self.url

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()
            self.runner = None

    async def __aenter__(self) -> ReplayServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def _make_app(self) -> web.Application:
        app = web.Application(client_max_size=32 * 1024 * 1024)
        app[SERVER_KEY] = self
        for prefix in ("/v1", ""):
            app.router.add_post(f"{prefix}/chat/completions", self._chat_completions)
            app.router.add_get(f"{prefix}/models", self._models)
        app.router.add_get("/requests", self._get_requests)
        app.router.add_delete("/requests", self._delete_requests)
        app.router.add_get("/scenarios", self._get_scenarios)
        app.router.add_post("/scenarios", self._post_scenario)
        app.router.add_get("/healthz", self._healthz)
        return app

    def _record(
        self,
        request: web.Request,
        body: Any,
        *,
        scenario: str | None,
        index: int | None,
        status: int,
        error: str | None,
        branch: int | None = None,
        turn: int | None = None,
    ) -> None:
        self._seq += 1
        body = body if isinstance(body, dict) else {}
        tools = body.get("tools")
        self.records.append(
            {
                "seq": self._seq,
                "timestamp": datetime.now(UTC).isoformat(),
                "path": request.path,
                "model": body.get("model"),
                "scenario": scenario,
                "branch": branch,
                "turn": turn,
                "index": index,
                "apiKey": _bearer(request),
                "status": status,
                "error": error,
                "stream": bool(body.get("stream")),
                "messages": body.get("messages"),
                "tools": [t.get("function", {}).get("name") for t in tools if isinstance(t, dict)]
                if isinstance(tools, list)
                else [],
                "params": {k: v for k, v in body.items() if k not in ("messages", "tools")},
            }
        )
        logger.info(
            "%s %s%s[%s] -> %s%s",
            request.path,
            scenario or body.get("model"),
            "" if branch is None else f".b{branch}",
            index,
            status,
            f": {error}" if error else "",
        )

    async def _chat_completions(self, request: web.Request) -> web.StreamResponse:
        if self.api_key is not None and _bearer(request) != self.api_key:
            # As OpenAI: a missing or wrong key is a 401 before the body is looked at.
            self._record(request, None, scenario=None, index=None, status=401, error="invalid API key")
            return _error(401, "Incorrect API key provided: this replay server requires its bearer key.",
                          code="invalid_api_key")
        try:
            body = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            # A malformed body is the client's error: answer as OpenAI does, do not crash.
            self._record(request, None, scenario=None, index=None, status=400, error=f"invalid JSON: {e}")
            return _error(400, f"We could not parse the JSON body of your request: {e}")

        def reject(
            status: int, message: str, *, scenario: str | None = None, branch: int | None = None, **kw: Any
        ) -> web.Response:
            self._record(
                request, body, scenario=scenario, branch=branch, index=None, status=status, error=message
            )
            return _error(status, message, **kw)

        if not isinstance(body, dict):
            return reject(400, "the request body must be a JSON object")
        model = body.get("model")
        if not isinstance(model, str) or not model:
            return reject(400, "you must provide a model parameter", param="model")
        scenario = self.resolve(model)
        if scenario is None:
            return reject(
                404,
                f"The model {model!r} does not exist: no replay scenario named "
                f"{model.removeprefix(MODEL_PREFIX)!r} (known: {', '.join(sorted(self.scenarios)) or 'none'})",
                param="model",
                code="model_not_found",
            )
        messages = body.get("messages")
        try:
            validate_history(messages)
        except HistoryError as e:
            return reject(400, str(e), scenario=scenario.name, param=e.param, code="invalid_history")
        if body.get("n") not in (None, 1):
            return reject(
                400, "the replay model answers with one choice only (n=1)", scenario=scenario.name, param="n"
            )
        stream = bool(body.get("stream"))
        stream_options = body.get("stream_options")
        if stream_options is not None and not stream:
            return reject(
                400,
                "The 'stream_options' parameter is only allowed when 'stream' is enabled.",
                scenario=scenario.name,
                param="stream_options",
            )

        answer = protocol.select_answer(scenario, messages)
        if answer is None:
            return reject(
                400,
                f"replay scenario {scenario.name!r}: no turn's cue occurs in the latest user message "
                f"(cues: {', '.join(repr(t.cue) for t in scenario.turns)}); add a turn without `cue`",
                scenario=scenario.name,
                code="no_matching_turn",
            )
        conversation, index = answer
        response = conversation.response(index)
        if response is None:
            if conversation.turn is not None:
                where = f" (turn {conversation.turn}, cue {scenario.turns[conversation.turn].cue!r})"
                holds = "the latest user message is followed by"
            else:
                where = (
                    ""
                    if conversation.branch is None
                    else f" (branch {conversation.branch}, match {scenario.branches[conversation.branch].match!r})"
                )
                holds = "the history already holds"
            return reject(
                400,
                f"replay scenario {scenario.name!r}{where} is exhausted: it has {len(conversation.responses)} "
                f"responses and {holds} {index} assistant messages, so it asks for "
                f"response index {index} (0-based); add responses or set fallbackContent",
                scenario=scenario.name,
                branch=conversation.branch,
                code="scenario_exhausted",
            )
        if conversation.turn is not None:
            response = protocol.render_turn(response, messages)
        # Ids count every assistant message, so a later turn never repeats an earlier turn's ids.
        id_index = count_assistant_messages(messages)

        self._record(
            request,
            body,
            scenario=scenario.name,
            branch=conversation.branch,
            turn=conversation.turn,
            index=index,
            status=200,
            error=None,
        )
        if response.delaySeconds:
            await asyncio.sleep(response.delaySeconds)

        tool_calls = protocol.openai_tool_calls(conversation.label, id_index, response)
        common = {
            "completion_id": protocol.completion_id(conversation.label, id_index, messages),
            "model": model,
            "created": int(time.time()),
            "response": response,
            "tool_calls": tool_calls,
            "token_usage": protocol.usage(response, tool_calls, messages, body.get("tools")),
        }
        if not stream:
            return web.json_response(protocol.completion(**common))

        include_usage = isinstance(stream_options, dict) and bool(stream_options.get("include_usage"))
        out = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await out.prepare(request)
        for chunk in protocol.chunks(**common, include_usage=include_usage):
            await out.write(f"data: {json.dumps(chunk)}\n\n".encode())
        await out.write(b"data: [DONE]\n\n")
        await out.write_eof()
        return out

    async def _models(self, request: web.Request) -> web.Response:
        data = [
            {"id": MODEL_PREFIX + name, "object": "model", "created": 0, "owned_by": "sessionops-replay"}
            for name in sorted(self.scenarios)
        ]
        return web.json_response({"object": "list", "data": data})

    async def _get_requests(self, request: web.Request) -> web.Response:
        wanted = request.query.get("scenario")
        records = [
            r for r in self.records if wanted is None or r["scenario"] == wanted.removeprefix(MODEL_PREFIX)
        ]
        return web.json_response(records)

    async def _delete_requests(self, request: web.Request) -> web.Response:
        self.records.clear()
        return web.Response(status=204)

    async def _get_scenarios(self, request: web.Request) -> web.Response:
        return web.json_response([s.model_dump(exclude_none=True) for _, s in sorted(self.scenarios.items())])

    async def _post_scenario(self, request: web.Request) -> web.Response:
        text = await request.text()
        try:
            # YAML is a superset of JSON, so one parser takes both bodies.
            data = yaml.safe_load(text)
            scenario = parse_scenario(data, source="POST /scenarios")
        except yaml.YAMLError as e:
            return _error(400, f"POST /scenarios: body is neither JSON nor YAML: {e}")
        except ScenarioError as e:
            return _error(400, str(e))
        replaced = scenario.name in self.scenarios
        self.add(scenario)
        return web.json_response(
            {
                "name": scenario.name,
                "model": MODEL_PREFIX + scenario.name,
                "responses": len(scenario.every_response()),
            },
            status=200 if replaced else 201,
        )

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok", "scenarios": len(self.scenarios)})


async def start_replay_server(
    dirs: Iterable[str | os.PathLike[str]] = (),
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    scenarios: Iterable[Scenario] = (),
) -> tuple[web.AppRunner, str]:
    """Starts a server and returns `(runner, url)`; stop it with `await runner.cleanup()`.

    The ReplayServer itself is `runner.app[SERVER_KEY]`.
    """
    server = ReplayServer(scenarios, dirs=dirs, host=host, port=port)
    url = await server.start()
    assert server.runner is not None
    return server.runner, url


@contextlib.contextmanager
def running_replay_server(
    dirs: Iterable[str | os.PathLike[str]] = (),
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    scenarios: Iterable[Scenario] = (),
    api_key: str | None = None,
) -> Iterator[ReplayServer]:
    """Runs a server on its own event loop in a daemon thread, for synchronous callers.

    A synchronous client (e.g. `ChatOpenAI.invoke`) called from a coroutine would block
    the loop serving it; a thread of its own avoids that deadlock.
    """
    server = ReplayServer(scenarios, dirs=dirs, host=host, port=port, api_key=api_key)
    loop = asyncio.new_event_loop()
    started = threading.Event()
    failure: list[BaseException] = []

    def run() -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(server.start())
        except BaseException as e:  # reported to the caller's thread below
            failure.append(e)
            started.set()
            return
        started.set()
        loop.run_forever()
        loop.run_until_complete(server.stop())
        loop.close()

    thread = threading.Thread(target=run, name="sessionops-replay", daemon=True)
    thread.start()
    started.wait()
    if failure:
        raise failure[0]
    try:
        yield server
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)


def scenario_summary(scenarios: Mapping[str, Scenario]) -> str:
    return ", ".join(f"{MODEL_PREFIX}{name}" for name in sorted(scenarios)) or "no scenarios"
