"""kopf's initial listing of a kind we handle waits, page by page, for our handlers
(``manager.listing``): listed objects never pile up in kopf's queues."""

from __future__ import annotations

import asyncio
import logging
from types import SimpleNamespace
from typing import Any

import pytest
from kopf._cogs.clients import fetching, watching

from sessionops.manager import listing


@pytest.fixture
def pages(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """kopf's own page loop, faked: three pages of two objects; records each page fetched."""
    fetched: list[int] = []

    async def kopf_fetch_objs(**_: Any) -> Any:
        for n in range(3):
            fetched.append(n)
            yield [{"n": n}, {"n": n}], "1"

    monkeypatch.setattr(listing, "_kopf_fetch_objs", kopf_fetch_objs)
    monkeypatch.setattr(listing, "PACE", listing.Pace())
    listing.PACE.paced = frozenset({"agentinputs"})
    return fetched


def resource(plural: str) -> Any:
    return SimpleNamespace(plural=plural)


async def consume(plural: str) -> list[Any]:
    got = []
    async for items, _ in listing.paced_fetch_objs(settings=None, resource=resource(plural), namespace=None,
                                                   logger=logging.getLogger("test")):
        got.extend(items)
    return got


async def test_the_next_page_waits_until_the_handlers_caught_up(pages: list[int]) -> None:
    task = asyncio.create_task(consume("agentinputs"))
    await asyncio.sleep(0.05)
    assert pages == [0, 1]  # one page may be in flight while the previous is handled
    listing.PACE.handling("agentinputs")
    await asyncio.sleep(0.05)
    assert pages == [0, 1]  # one of page 0's objects is still unhandled
    listing.PACE.handling("agentinputs")
    await asyncio.sleep(0.05)
    assert pages == [0, 1, 2]
    for _ in range(4):
        listing.PACE.handling("agentinputs")
    assert len(await asyncio.wait_for(task, 1)) == 6


async def test_a_relisting_is_paced_too_whatever_the_watch_delivered_before(pages: list[int]) -> None:
    """A re-list (the watch expired) starts from zero: the watch events handled since the first
    listing are no credit for it."""
    first = asyncio.create_task(consume("agentinputs"))
    for _ in range(6):
        await asyncio.sleep(0.01)
        listing.PACE.handling("agentinputs")
    assert len(await asyncio.wait_for(first, 1)) == 6
    for _ in range(10):  # the watch's events, after the listing
        listing.PACE.handling("agentinputs")
    pages.clear()
    again = asyncio.create_task(consume("agentinputs"))
    await asyncio.sleep(0.05)
    assert pages == [0, 1]
    for _ in range(6):
        listing.PACE.handling("agentinputs")
    assert len(await asyncio.wait_for(again, 1)) == 6


async def test_kinds_we_do_not_handle_are_listed_unpaced(pages: list[int]) -> None:
    assert len(await asyncio.wait_for(consume("customresourcedefinitions"), 1)) == 6
    assert pages == [0, 1, 2]


async def test_a_page_never_waits_longer_than_the_bound(pages: list[int], monkeypatch: pytest.MonkeyPatch,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(listing, "PAGE_WAIT", 0.05)
    monkeypatch.setattr(listing.Pace.caught_up, "__defaults__", (0.05,))
    assert len(await asyncio.wait_for(consume("agentinputs"), 2)) == 6  # nothing handled at all
    assert "handlers are" in caplog.text


def test_kopf_still_lists_through_the_module_we_wrap() -> None:
    """The pacing holds only while kopf's watcher calls ``fetching.fetch_objs`` by that name."""
    import inspect

    assert "fetching.fetch_objs(" in inspect.getsource(watching)
    assert callable(fetching.fetch_objs)
