"""Watch streams: resumption, 410 Gone, bookmarks, timeouts, selectors, single objects."""

from __future__ import annotations

import asyncio

from samples import CMS, configmap


async def collect(api, path, params, until, timeout=5.0):
    events = []
    try:
        async for event in api.watch(path, params, timeout=timeout):
            events.append(event)
            if until(events):
                break
    except TimeoutError:
        pass
    return events


def summary(events):
    return [(e['type'], e['object']['metadata'].get('name')) for e in events if e['type'] != 'BOOKMARK']


async def test_resume_from_resource_version(api):
    await api.post(CMS, configmap('before'))
    rv = (await api.get(CMS)).body['metadata']['resourceVersion']
    await api.post(CMS, configmap('after'))
    await api.patch(f'{CMS}/after', {'data': {'a': '1'}})
    deleted = (await api.delete(f'{CMS}/after')).body
    events = await collect(api, CMS, {'resourceVersion': rv}, lambda ev: len(ev) >= 3)
    assert summary(events) == [('ADDED', 'after'), ('MODIFIED', 'after'), ('DELETED', 'after')]
    final = events[-1]['object']  # the final state, with the resourceVersion of the deletion itself
    assert final['metadata']['resourceVersion'] == deleted['metadata']['resourceVersion']
    assert int(final['metadata']['resourceVersion']) > int(events[1]['object']['metadata']['resourceVersion'])
    rvs = [int(e['object']['metadata']['resourceVersion']) for e in events]
    assert rvs == sorted(rvs) and rvs[0] > int(rv)


async def test_too_old_resource_version_is_gone(cluster, api):
    await api.post(CMS, configmap('a'))
    rv = (await api.get(CMS)).body['metadata']['resourceVersion']
    await api.post(CMS, configmap('b'))
    cluster.compact()
    events = await collect(api, CMS, {'resourceVersion': rv}, lambda ev: True)
    assert events[0]['type'] == 'ERROR'
    assert events[0]['object']['code'] == 410 and events[0]['object']['reason'] == 'Expired'


async def test_initial_events_bookmarks_and_timeout(api):
    await api.post(CMS, configmap('a'))
    events = await collect(api, CMS, {'allowWatchBookmarks': 'true', 'timeoutSeconds': '1'}, lambda ev: False)
    assert ('ADDED', 'a') in summary(events)
    bookmarks = [e for e in events if e['type'] == 'BOOKMARK']
    assert bookmarks and bookmarks[-1]['object']['kind'] == 'ConfigMap'
    assert bookmarks[-1]['object']['metadata']['resourceVersion']


async def test_send_initial_events(api):
    await api.post(CMS, configmap('a'))
    params = {
        'sendInitialEvents': 'true',
        'resourceVersionMatch': 'NotOlderThan',
        'allowWatchBookmarks': 'true',
    }
    events = await collect(api, CMS, params, lambda ev: ev[-1]['type'] == 'BOOKMARK')
    assert ('ADDED', 'a') in summary(events)
    assert events[-1]['object']['metadata']['annotations'] == {'k8s.io/initial-events-end': 'true'}


async def test_selector_transitions_and_single_object(api):
    rv = (await api.get(CMS)).body['metadata']['resourceVersion']
    await api.post(CMS, {**configmap('x'), 'metadata': {'name': 'x', 'labels': {'app': 'a'}}})
    await api.patch(f'{CMS}/x', {'metadata': {'labels': {'app': 'b'}}})
    await api.patch(f'{CMS}/x', {'metadata': {'labels': {'app': 'a'}}})
    await api.post(CMS, configmap('y'))
    events = await collect(api, CMS, {'resourceVersion': rv, 'labelSelector': 'app=a'}, lambda ev: len(ev) >= 3)
    assert summary(events) == [('ADDED', 'x'), ('DELETED', 'x'), ('ADDED', 'x')]
    events = await collect(
        api, CMS, {'resourceVersion': rv, 'fieldSelector': 'metadata.name=y'}, lambda ev: len(ev) >= 1
    )
    assert summary(events) == [('ADDED', 'y')]
    events = await collect(api, f'{CMS}/y', {'resourceVersion': rv}, lambda ev: len(ev) >= 1)
    assert summary(events) == [('ADDED', 'y')]


async def test_live_events(api):
    async def writer():
        await asyncio.sleep(0.2)
        await api.post(CMS, configmap('live'))
        await api.delete(f'{CMS}/live')

    rv = (await api.get(CMS)).body['metadata']['resourceVersion']
    task = asyncio.create_task(writer())
    events = await collect(api, CMS, {'resourceVersion': rv}, lambda ev: len(summary(ev)) >= 2)
    await task
    assert summary(events) == [('ADDED', 'live'), ('DELETED', 'live')]


async def test_kubectl_delete_waits_through_watch(api, kubectl):
    await api.post(CMS, {**configmap('c'), 'metadata': {'name': 'c', 'finalizers': ['test/f']}})

    async def release():
        await asyncio.sleep(0.5)
        await api.patch(f'{CMS}/c', {'metadata': {'finalizers': None}})

    task = asyncio.create_task(release())
    result = await kubectl('delete', 'configmap', 'c', '--timeout=20s')
    await task
    assert 'configmap "c" deleted' in result.stdout
