"""A tiny JSON client for tests talking to the test API server over HTTP (no Kubernetes client library)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import ssl as ssl_
from collections.abc import AsyncIterator
from typing import Any

import aiohttp


@dataclasses.dataclass
class Reply:
    status: int
    body: Any
    headers: dict[str, str]
    warnings: list[str]

    def __getitem__(self, key: str) -> Any:
        return self.body[key]


class ApiClient:
    def __init__(self, base_url: str, headers: dict[str, str] | None = None, *,
                 ssl: ssl_.SSLContext | None = None) -> None:
        self.base_url = base_url.rstrip('/')
        self.headers = dict(headers or {})
        self.ssl = ssl
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> ApiClient:
        self._session = aiohttp.ClientSession(headers=self.headers,
                                              connector=aiohttp.TCPConnector(ssl=self.ssl) if self.ssl else None)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._session is not None:
            await self._session.close()

    @property
    def session(self) -> aiohttp.ClientSession:
        assert self._session is not None, 'use ApiClient as an async context manager'
        return self._session

    async def request(self, method: str, path: str, body: Any = None, *, params: dict[str, str] | None = None,
                      content_type: str = 'application/json', headers: dict[str, str] | None = None) -> Reply:
        data = None
        if body is not None:
            data = body if isinstance(body, (bytes, str)) else json.dumps(body)
        hdrs = {'Content-Type': content_type, **(headers or {})}
        async with self.session.request(method, self.base_url + path, data=data, params=params,
                                        headers=hdrs) as response:
            text = await response.text()
            try:
                parsed: Any = json.loads(text) if text else None
            except ValueError:
                parsed = text
            warnings = response.headers.getall('Warning', [])
            return Reply(response.status, parsed, dict(response.headers), list(warnings))

    async def get(self, path: str, **kwargs: Any) -> Reply:
        return await self.request('GET', path, **kwargs)

    async def post(self, path: str, body: Any, **kwargs: Any) -> Reply:
        return await self.request('POST', path, body, **kwargs)

    async def put(self, path: str, body: Any, **kwargs: Any) -> Reply:
        return await self.request('PUT', path, body, **kwargs)

    async def patch(self, path: str, body: Any, kind: str = 'merge', **kwargs: Any) -> Reply:
        content_type = {'merge': 'application/merge-patch+json', 'json': 'application/json-patch+json',
                        'strategic': 'application/strategic-merge-patch+json',
                        'apply': 'application/apply-patch+yaml'}[kind]
        return await self.request('PATCH', path, body, content_type=content_type, **kwargs)

    async def delete(self, path: str, body: Any = None, **kwargs: Any) -> Reply:
        return await self.request('DELETE', path, body, **kwargs)

    async def watch(self, path: str, params: dict[str, str] | None = None, *, timeout: float = 10
                    ) -> AsyncIterator[dict[str, Any]]:
        """Yield watch events until the server ends the stream (or ``timeout`` passes)."""
        params = {'watch': 'true', **(params or {})}
        async with asyncio.timeout(timeout):
            async with self.session.get(self.base_url + path, params=params) as response:
                assert response.status == 200, await response.text()
                async for line in response.content:
                    if line.strip():
                        yield json.loads(line)
