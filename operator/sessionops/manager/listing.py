"""kopf's initial listings, paced by the handlers that consume them.

kopf lists each watched kind page by page (``settings.watching.chunk_size``), but nothing holds
a page back until the previous one is handled: every listed object waits, parsed in full
(managed fields, snapshot and all), in the queue of its per-object worker. Listing is faster
than handling (about a millisecond of CPU per object here), so at a restart over 10,000
sessions and 50,000 inputs nearly all of them waited in memory at once, and the allocator kept
most of that peak (RSS 665 MB once settled). Here the next page of a kind we handle is fetched
only once our handlers have seen all but one page of what was listed of it.

While a kind is being listed kopf does not watch it yet, so every event its handler sees then
is a listed one: counting them is counting the listing's progress. A page never waits more than
``PAGE_WAIT`` seconds (a listed event kopf merged into a later one is never seen by itself).

kopf has no setting for this: the page loop is wrapped where kopf's watcher calls it
(``kopf._cogs.clients.fetching.fetch_objs``, pinned with kopf in pyproject.toml; a test checks
that kopf still calls it through that module).
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import AsyncIterator, Collection
from typing import Any

from kopf._cogs.clients import fetching

PAGE_WAIT = 30.0
"""Seconds a page waits at most for the handlers to catch up."""


class Pace:
    """Per kind (plural): objects listed by kopf, and events our handlers have seen."""

    def __init__(self) -> None:
        self.listed: collections.Counter[str] = collections.Counter()
        self.handled: collections.Counter[str] = collections.Counter()
        self.paced: frozenset[str] = frozenset()
        self._waiters: dict[str, list[tuple[int, asyncio.Event]]] = collections.defaultdict(list)

    def restart(self, plural: str) -> None:
        """A listing of ``plural`` begins: counted from zero, so the watch events handled since
        an earlier listing (a re-list after the watch expired) are no credit for this one."""
        self.listed[plural] = self.handled[plural] = 0

    def behind(self, plural: str) -> int:
        return self.listed[plural] - self.handled[plural]

    def handling(self, plural: str) -> None:
        """Our handler saw an event of ``plural`` (any type: during its listing all are listed)."""
        self.handled[plural] += 1
        for allowed, event in self._waiters.get(plural, ()):
            if self.behind(plural) <= allowed:
                event.set()

    async def caught_up(self, plural: str, allowed: int, timeout: float = PAGE_WAIT) -> bool:
        """Wait until at most ``allowed`` listed objects of ``plural`` are still unhandled."""
        if self.behind(plural) <= allowed:
            return True
        waiter = (allowed, asyncio.Event())
        self._waiters[plural].append(waiter)
        try:
            await asyncio.wait_for(waiter[1].wait(), timeout)
            return True
        except TimeoutError:
            return False
        finally:
            self._waiters[plural].remove(waiter)


PACE = Pace()
_kopf_fetch_objs = fetching.fetch_objs


async def paced_fetch_objs(*, settings: Any, resource: Any, namespace: Any,
                           logger: Any) -> AsyncIterator[tuple[Collection[Any], str]]:
    """kopf's page loop, holding the next page of a paced kind back until the last is handled."""
    plural = resource.plural
    if plural in PACE.paced:
        PACE.restart(plural)
    async for items, resource_version in _kopf_fetch_objs(settings=settings, resource=resource,
                                                          namespace=namespace, logger=logger):
        size = len(items)
        yield items, resource_version
        # kopf has queued every item of the page by now (it asks for the next one).
        if plural in PACE.paced:
            PACE.listed[plural] += size
            if not await PACE.caught_up(plural, allowed=size):
                logger.warning("listing %s: the handlers are %d objects behind after %.0f s; listing on",
                               plural, PACE.behind(plural), PAGE_WAIT)


def pace(plurals: Collection[str]) -> None:
    """Pace kopf's listings of these kinds (each must count its events with ``PACE.handling``)."""
    PACE.paced = frozenset(plurals)
    fetching.fetch_objs = paced_fetch_objs  # type: ignore[assignment]
