"""Watch streams: resume from a resourceVersion, 410 for compacted history, bookmarks, timeouts, selectors."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any

import aiohttp.web

from . import errors
from .store import Event, Store, TooOld


def _event_line(event_type: str, obj: dict[str, Any]) -> bytes:
    return json.dumps({'type': event_type, 'object': obj}, separators=(',', ':')).encode() + b'\n'


def _transform(event: Event, namespace: str | None, matches: Callable[[dict[str, Any]], bool]) -> str | None:
    """The event type this particular watcher sees (selector transitions become ADDED/DELETED), or None."""
    def visible(obj: dict[str, Any] | None) -> bool:
        if obj is None:
            return False
        if namespace is not None and (obj.get('metadata', {}).get('namespace') or '') != namespace:
            return False
        return matches(obj)

    if event.type == 'ADDED':
        return 'ADDED' if visible(event.obj) else None
    if event.type == 'DELETED':
        return 'DELETED' if visible(event.old) else None
    new_ok, old_ok = visible(event.obj), visible(event.old)
    if new_ok and old_ok:
        return 'MODIFIED'
    if new_ok:
        return 'ADDED'
    if old_ok:
        return 'DELETED'
    return None


async def serve_watch(
        *,
        raw_request: aiohttp.web.BaseRequest,
        store: Store,
        gp: tuple[str, str],
        namespace: str | None,
        matches: Callable[[dict[str, Any]], bool],
        present: Callable[[dict[str, Any]], dict[str, Any]],
        bookmark_kind: dict[str, str],
        params: dict[str, str],
        bookmark_interval: float,
        closing: asyncio.Event,
) -> aiohttp.web.StreamResponse:
    rv_param = params.get('resourceVersion') or ''
    send_initial = params.get('sendInitialEvents') == 'true'
    bookmarks = params.get('allowWatchBookmarks') == 'true'
    timeout = params.get('timeoutSeconds')
    try:
        deadline = time.monotonic() + float(timeout) if timeout else None
    except ValueError:
        raise errors.bad_request(f'invalid timeoutSeconds: {timeout!r}') from None
    if send_initial and params.get('resourceVersionMatch') != 'NotOlderThan':
        raise errors.invalid('ListOptions', 'meta.k8s.io', '', [errors.forbidden_field(
            'resourceVersionMatch', 'sendInitialEvents requires setting resourceVersionMatch to NotOlderThan')])
    if rv_param not in ('', '0') and not rv_param.isdigit():
        raise errors.bad_request(f'invalid resource version: {rv_param!r}')

    # Subscribe and take the snapshot in one synchronous step: nothing is lost or duplicated.
    sub = store.subscribe(gp)
    try:
        initial: list[bytes] = []
        expired: errors.ApiError | None = None
        if rv_param in ('', '0') or send_initial:
            for obj in store.list(gp, namespace):
                if matches(obj):
                    initial.append(_event_line('ADDED', present(obj)))
        else:
            try:
                for event in store.events_since(gp, int(rv_param)):
                    seen = _transform(event, namespace, matches)
                    if seen is not None:
                        initial.append(_event_line(seen, present(event.obj)))
            except TooOld as e:
                expired = errors.too_old(e.requested, e.oldest)

        response = aiohttp.web.StreamResponse(status=200, headers={'Content-Type': 'application/json'})
        response.enable_chunked_encoding()
        await response.prepare(raw_request)
        if expired is not None:
            await response.write(_event_line('ERROR', expired.as_status()))
            await response.write_eof()
            return response
        for line in initial:
            await response.write(line)
        if send_initial:
            mark = {**bookmark_kind, 'metadata': {'resourceVersion': str(store.rv),
                                                  'annotations': {'k8s.io/initial-events-end': 'true'}}}
            await response.write(_event_line('BOOKMARK', mark))

        next_bookmark = time.monotonic() + bookmark_interval
        while not closing.is_set():
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                break
            if bookmarks and now >= next_bookmark:
                mark = {**bookmark_kind, 'metadata': {'resourceVersion': str(store.rv)}}
                await response.write(_event_line('BOOKMARK', mark))
                next_bookmark = now + bookmark_interval
            wait = 0.5
            if deadline is not None:
                wait = min(wait, max(deadline - now, 0))
            if bookmarks:
                wait = min(wait, max(next_bookmark - now, 0))
            try:
                event = await asyncio.wait_for(sub.queue.get(), timeout=wait)
            except TimeoutError:
                continue
            seen = _transform(event, namespace, matches)
            if seen is not None:
                await response.write(_event_line(seen, present(event.obj)))
        await response.write_eof()
        return response
    except (ConnectionResetError, ConnectionError):
        return response
    finally:
        store.unsubscribe(sub)
