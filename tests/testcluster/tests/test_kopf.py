"""A real kopf operator, run in-process against the test cluster; assertions on what the API server holds."""

from __future__ import annotations

import asyncio
import contextlib
import logging

import kmock
import kopf
import pytest

from samples import CRS, GROUP, JOBS, cr, crd
from testcluster.client import ApiClient

FINALIZER = f'{GROUP}/finalizer'


async def eventually(check, timeout: float = 15.0, interval: float = 0.1):
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        try:
            result = await check()
        except AssertionError:
            if asyncio.get_running_loop().time() > deadline:
                raise
        else:
            return result
        await asyncio.sleep(interval)


@pytest.mark.parametrize('storage', ['status', 'annotations'])
async def test_kopf_operator_lifecycle(cluster, api, monkeypatch, storage, caplog):
    caplog.set_level(logging.INFO)
    monkeypatch.setenv('KUBECONFIG', str(cluster.kubeconfig))
    assert (await api.post('/apis/apiextensions.k8s.io/v1/customresourcedefinitions', crd())).status == 201

    registry = kopf.OperatorRegistry()
    deleted: list[str] = []
    created: list[str] = []

    @kopf.on.login(registry=registry)
    def login(**kwargs):
        return kopf.login_with_kubeconfig(**kwargs)

    @kopf.on.startup(registry=registry)
    def configure(settings: kopf.OperatorSettings, **_):
        settings.watching.server_timeout = 2
        settings.watching.client_timeout = 5
        settings.peering.standalone = True
        settings.persistence.finalizer = FINALIZER
        if storage == 'status':
            settings.persistence.progress_storage = kopf.StatusProgressStorage()
            settings.persistence.diffbase_storage = kopf.StatusDiffBaseStorage()

    @kopf.on.create(GROUP, 'v1', 'agentsessions', id='create_fn', registry=registry)
    async def create_fn(body, name, namespace, patch, **_):
        job = {'apiVersion': 'batch/v1', 'kind': 'Job', 'metadata': {'name': f'{name}-job'},
               'spec': {'template': {'spec': {'restartPolicy': 'Never',
                                              'containers': [{'name': 'main', 'image': 'busybox:1.36'}]}}}}
        kopf.adopt(job, owner=body)
        created.append(name)
        async with ApiClient(cluster.api_url, headers=cluster.admin_headers, ssl=cluster.client_ssl()) as client:
            reply = await client.post(f'/apis/batch/v1/namespaces/{namespace}/jobs', job)
        assert reply.status == 201, reply.body
        patch.status['phase'] = 'Running'
        return {'job': job['metadata']['name']}

    @kopf.timer(GROUP, 'v1', 'agentsessions', id='tick', interval=0.3, registry=registry)
    def tick(status, patch, **_):
        patch.status['ticks'] = int(status.get('ticks') or 0) + 1

    @kopf.on.delete(GROUP, 'v1', 'agentsessions', id='delete_fn', registry=registry)
    def delete_fn(name, **_):
        deleted.append(name)

    stop_flag = asyncio.Event()
    operator = asyncio.create_task(kopf.operator(registry=registry, clusterwide=True, stop_flag=stop_flag,
                                                 standalone=True))
    try:
        await api.post(CRS, cr('s1'))

        async def handled():
            obj = (await api.get(f'{CRS}/s1')).body
            assert FINALIZER in obj['metadata'].get('finalizers', [])
            # Until kopf's first status patch there is no status at all: an assertion, so
            # ``eventually`` polls again instead of the KeyError ending the test.
            assert 'status' in obj
            assert obj['status'].get('phase') == 'Running'
            assert obj['status'].get('create_fn') == {'job': 's1-job'}
            assert int(obj['status'].get('ticks') or 0) >= 2
            return obj

        obj = await eventually(handled)
        if storage == 'status':
            assert 'last-handled-configuration' in obj['status']['kopf']
            assert 'kopf.zalando.org/last-handled-configuration' not in obj['metadata'].get('annotations', {})
        else:
            assert 'kopf.zalando.org/last-handled-configuration' in obj['metadata']['annotations']
        job = (await api.get(f'{JOBS}/s1-job')).body
        assert job['metadata']['ownerReferences'][0]['uid'] == obj['metadata']['uid']

        # The watch-streams end every 2 s (server_timeout) and resume from the last resourceVersion.
        # Nothing is handled twice. (410 Gone on resumption is covered over HTTP in test_watch.py.)
        def requests(watch: bool):
            return [r for r in list(cluster) if r.resource == kmock.resource(GROUP, 'v1', 'agentsessions')
                    and r.name is None and r.method == kmock.method.GET
                    and (r.params.get('watch') == 'true') == watch
                    and (not watch or r.params.get('resourceVersion'))]

        async def more(watch: bool, count: int):
            assert len(requests(watch)) >= count

        await eventually(lambda: more(True, 1))       # a watch resumed from a resourceVersion
        assert len(requests(False)) == 1              # listed once, then only watched
        await api.patch(f'{CRS}/s1', {'metadata': {'labels': {'after': 'compaction'}}})
        await asyncio.sleep(0.5)
        assert created == ['s1']

        await api.delete(f'{CRS}/s1')

        async def gone():
            assert (await api.get(f'{CRS}/s1')).status == 404
            assert (await api.get(f'{JOBS}/s1-job')).status == 404

        await eventually(gone)
        assert deleted == ['s1']
    finally:
        stop_flag.set()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(operator, timeout=10)
    problems = [r.getMessage() for r in caplog.records
                if r.levelno >= logging.ERROR or 'Patching failed' in r.getMessage()]
    assert not problems
