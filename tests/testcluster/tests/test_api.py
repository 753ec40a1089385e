"""API-server semantics of the test cluster, checked over HTTPS with a plain JSON client (and kubectl where natural)."""

from __future__ import annotations

import re
import uuid

import kmock

from samples import CMS, CRS, DEPLOYS, GROUP, JOBS, configmap, cr, crd, deployment, job
from testcluster import hooks

CRDS = '/apis/apiextensions.k8s.io/v1/customresourcedefinitions'


async def make_crd(api, **kwargs):
    reply = await api.post(CRDS, crd(**kwargs))
    assert reply.status == 201, reply.body
    return reply.body


async def test_identity_metadata(api):
    a = (await api.post(CMS, configmap('a'))).body
    b = (await api.post(CMS, {'apiVersion': 'v1', 'kind': 'ConfigMap', 'metadata': {'generateName': 'gen-'}})).body
    assert uuid.UUID(a['metadata']['uid']).version == 4
    assert int(b['metadata']['resourceVersion']) > int(a['metadata']['resourceVersion'])
    assert re.fullmatch(r'\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ', a['metadata']['creationTimestamp'])
    assert a['metadata']['generation'] == 1
    assert re.fullmatch(r'gen-[a-z0-9]{5}', b['metadata']['name'])
    listed = (await api.get(CMS)).body
    assert listed['kind'] == 'ConfigMapList' and listed['apiVersion'] == 'v1'
    assert int(listed['metadata']['resourceVersion']) >= int(b['metadata']['resourceVersion'])


async def test_generation_counts_spec_changes_only(api):
    await make_crd(api)
    obj = (await api.post(CRS, cr('s1'))).body
    assert obj['metadata']['generation'] == 1
    obj = (await api.patch(f'{CRS}/s1', {'metadata': {'labels': {'x': 'y'}}})).body
    assert obj['metadata']['generation'] == 1
    obj = (await api.patch(f'{CRS}/s1/status', {'status': {'phase': 'Running'}})).body
    assert obj['metadata']['generation'] == 1 and obj['status'] == {'phase': 'Running'}
    obj = (await api.patch(f'{CRS}/s1', {'spec': {'model': 'm2'}, 'status': {'phase': 'Ignored'}})).body
    assert obj['metadata']['generation'] == 2 and obj['status'] == {'phase': 'Running'}
    obj = (
        await api.patch(
            f'{CRS}/s1/status',
            {
                'spec': {'model': 'ignored'},
                'status': {'phase': 'Done'},
                'metadata': {'labels': {'ignored': 'yes'}},
            },
        )
    ).body
    assert (
        obj['spec'] == {'model': 'm2'}
        and obj['status'] == {'phase': 'Done'}
        and 'ignored' not in obj['metadata']['labels']
    )
    # A no-op write keeps the resourceVersion and sends no event.
    again = (await api.patch(f'{CRS}/s1', {'spec': {'model': 'm2'}})).body
    assert again['metadata']['resourceVersion'] == obj['metadata']['resourceVersion']


async def test_conflicts_on_stale_resource_version(api):
    obj = (await api.post(CMS, configmap('c', a='1'))).body
    stale = obj['metadata']['resourceVersion']
    assert (await api.patch(f'{CMS}/c', {'data': {'a': '2'}})).status == 200
    obj['data'] = {'a': '3'}
    reply = await api.put(f'{CMS}/c', obj)
    assert reply.status == 409
    assert reply.body['reason'] == 'Conflict' and reply.body['kind'] == 'Status'
    assert reply.body['message'].startswith('Operation cannot be fulfilled on configmaps "c": the object has been')
    reply = await api.patch(f'{CMS}/c', {'metadata': {'resourceVersion': stale}, 'data': {'a': '4'}})
    assert reply.status == 409
    obj['metadata'].pop('resourceVersion')
    assert (await api.put(f'{CMS}/c', obj)).status == 200  # unconditional update


async def test_error_bodies(api, kubectl):
    await api.post(CMS, configmap('c'))
    reply = await api.post(CMS, configmap('c'))
    assert reply.status == 409
    assert reply.body['reason'] == 'AlreadyExists' and reply.body['details'] == {
        'name': 'c',
        'kind': 'configmaps',
    }
    reply = await api.get(f'{JOBS}/nope')
    assert reply.status == 404
    assert reply.body == {
        'kind': 'Status',
        'apiVersion': 'v1',
        'metadata': {},
        'status': 'Failure',
        'code': 404,
        'message': 'jobs.batch "nope" not found',
        'reason': 'NotFound',
        'details': {'name': 'nope', 'group': 'batch', 'kind': 'jobs'},
    }
    reply = await api.post(CMS, configmap('Bad_Name'))
    assert reply.status == 422 and reply.body['reason'] == 'Invalid'
    assert reply.body['details']['causes'][0]['field'] == 'metadata.name'
    assert (await api.post(CMS, {'metadata': {}})).status == 422
    reply = await api.post(CMS, configmap('x', namespace='other'))
    assert reply.status == 400 and 'does not match the namespace' in reply.body['message']
    result = await kubectl('get', 'configmap', 'nope', check=False)
    assert result.returncode == 1
    assert result.stderr.strip() == 'Error from server (NotFound): configmaps "nope" not found'


async def test_json_patch_test_op_fails_with_422(api):
    obj = (await api.post(CMS, configmap('c', a='1'))).body
    ops = [
        {'op': 'test', 'path': '/metadata/resourceVersion', 'value': '999999'},
        {'op': 'add', 'path': '/metadata/finalizers', 'value': ['x/y']},
    ]
    reply = await api.patch(f'{CMS}/c', ops, kind='json')
    assert reply.status == 422 and reply.body['reason'] == 'Invalid'
    ops[0]['value'] = obj['metadata']['resourceVersion']
    reply = await api.patch(f'{CMS}/c', ops, kind='json')
    assert reply.status == 200 and reply.body['metadata']['finalizers'] == ['x/y']
    assert (await api.patch(f'{CMS}/c', [{'op': 'remove', 'path': '/nope'}], kind='json')).status == 422
    assert (await api.patch(f'{CMS}/c', b'not json', kind='json')).status == 400


async def test_merge_and_strategic_patches(api):
    await api.post(DEPLOYS, deployment('web'))
    reply = await api.patch(f'{DEPLOYS}/web', {'metadata': {'labels': {'a': '1', 'b': '2'}}})
    reply = await api.patch(f'{DEPLOYS}/web', {'metadata': {'labels': {'a': None}}})
    assert reply.body['metadata']['labels'] == {'b': '2'}
    smp = {
        'spec': {
            'template': {
                'spec': {
                    'containers': [
                        {
                            'name': 'web',
                            'env': [{'name': 'B', 'value': '2'}],
                            'ports': [{'containerPort': 8080}],
                        },
                        {'name': 'sidecar', 'image': 'busybox:1.36'},
                    ]
                }
            }
        }
    }
    reply = await api.patch(f'{DEPLOYS}/web', smp, kind='strategic')
    containers = reply.body['spec']['template']['spec']['containers']
    assert [c['name'] for c in containers] == ['web', 'sidecar']
    assert [e['name'] for e in containers[0]['env']] == ['A', 'B']
    assert [p['containerPort'] for p in containers[0]['ports']] == [80, 8080]
    assert containers[0]['image'] == 'nginx:1.25'
    delete = {'spec': {'template': {'spec': {'containers': [{'name': 'sidecar', '$patch': 'delete'}]}}}}
    reply = await api.patch(f'{DEPLOYS}/web', delete, kind='strategic')
    assert [c['name'] for c in reply.body['spec']['template']['spec']['containers']] == ['web']
    retain = {'spec': {'strategy': {'$retainKeys': ['type'], 'type': 'Recreate'}}}
    reply = await api.patch(f'{DEPLOYS}/web', retain, kind='strategic')
    assert reply.body['spec']['strategy'] == {'type': 'Recreate'}
    replace = {
        'spec': {'template': {'spec': {'containers': [{'$patch': 'replace'}, {'name': 'only', 'image': 'x:1'}]}}}
    }
    reply = await api.patch(f'{DEPLOYS}/web', replace, kind='strategic')
    assert [c['name'] for c in reply.body['spec']['template']['spec']['containers']] == ['only']
    await make_crd(api)
    await api.post(CRS, cr('s1'))
    reply = await api.patch(f'{CRS}/s1', {'spec': {'model': 'x'}}, kind='strategic')
    assert reply.status == 415 and reply.body['reason'] == 'UnsupportedMediaType'


async def test_server_side_apply(api):
    manifest = {
        'apiVersion': 'v1',
        'kind': 'ConfigMap',
        'metadata': {'name': 'c', 'labels': {'x': '1'}},
        'data': {'a': '1', 'b': '2'},
    }
    params = {'fieldManager': 'alice'}
    reply = await api.patch(f'{CMS}/c', manifest, kind='apply', params=params)
    assert reply.status == 201
    rv = reply.body['metadata']['resourceVersion']
    assert reply.body['metadata']['managedFields'][0]['manager'] == 'alice'
    assert reply.body['metadata']['managedFields'][0]['operation'] == 'Apply'
    reply = await api.patch(f'{CMS}/c', manifest, kind='apply', params=params)
    assert reply.status == 200 and reply.body['metadata']['resourceVersion'] == rv  # a no-op
    await api.patch(f'{CMS}/c', {'data': {'c': '3'}}, params={'fieldManager': 'bob'})  # bob owns data.c
    manifest['data'] = {'a': '1'}
    reply = await api.patch(f'{CMS}/c', manifest, kind='apply', params=params)
    assert reply.body['data'] == {'a': '1', 'c': '3'}  # b removed (alice's only), c kept (bob's)
    bob = {'apiVersion': 'v1', 'kind': 'ConfigMap', 'metadata': {'name': 'c'}, 'data': {'a': 'bob'}}
    reply = await api.patch(f'{CMS}/c', bob, kind='apply', params={'fieldManager': 'bob'})
    assert reply.status == 409 and reply.body['reason'] == 'Conflict' and 'alice' in reply.body['message']
    reply = await api.patch(f'{CMS}/c', bob, kind='apply', params={'fieldManager': 'bob', 'force': 'true'})
    assert reply.status == 200 and reply.body['data']['a'] == 'bob'
    assert (await api.patch(f'{CMS}/c', bob, kind='apply')).status == 400  # fieldManager is required


async def test_server_side_apply_keyed_lists(api):
    await make_crd(api)
    manifest = cr('s1', model='m', tools=[{'name': 't1', 'url': 'u1'}, {'name': 't2', 'url': 'u2'}])
    await api.patch(f'{CRS}/s1', manifest, kind='apply', params={'fieldManager': 'a'})
    other = {
        'apiVersion': f'{GROUP}/v1',
        'kind': 'AgentSession',
        'metadata': {'name': 's1'},
        'spec': {'tools': [{'name': 't3', 'url': 'u3'}]},
    }
    await api.patch(f'{CRS}/s1', other, kind='apply', params={'fieldManager': 'b'})
    manifest['spec']['tools'] = [{'name': 't1', 'url': 'u1'}]
    reply = await api.patch(f'{CRS}/s1', manifest, kind='apply', params={'fieldManager': 'a'})
    assert [t['name'] for t in reply.body['spec']['tools']] == ['t1', 't3']


async def test_status_subresource_isolation_for_builtins(api):
    await api.post(JOBS, job('j'))
    reply = await api.patch(f'{JOBS}/j', {'status': {'active': 1}})
    assert 'active' not in reply.body.get('status', {})
    reply = await api.patch(f'{JOBS}/j/status', {'status': {'active': 1}, 'spec': {'parallelism': 5}})
    assert reply.body['status'] == {'active': 1} and reply.body['spec']['parallelism'] == 1


async def test_finalizers_and_deletion(api):
    await api.post(CMS, {**configmap('c'), 'metadata': {'name': 'c', 'finalizers': ['test/f']}})
    reply = await api.delete(f'{CMS}/c')
    assert reply.status == 200 and reply.body['metadata']['deletionTimestamp']
    assert reply.body['metadata']['deletionGracePeriodSeconds'] == 0
    assert (await api.get(f'{CMS}/c')).status == 200
    reply = await api.patch(f'{CMS}/c', {'metadata': {'finalizers': ['test/f', 'test/new']}})
    assert reply.status == 422 and 'no new finalizers can be added' in reply.body['message']
    reply = await api.patch(f'{CMS}/c', {'metadata': {'finalizers': None}})
    assert reply.status == 200
    assert (await api.get(f'{CMS}/c')).status == 404


async def test_delete_preconditions_and_collection(api, kubectl):
    obj = (await api.post(CMS, configmap('c'))).body
    reply = await api.delete(f'{CMS}/c', {'preconditions': {'uid': str(uuid.uuid4())}})
    assert reply.status == 409 and 'Precondition failed' in reply.body['message']
    reply = await api.delete(f'{CMS}/c', {'preconditions': {'uid': obj['metadata']['uid'], 'resourceVersion': '1'}})
    assert reply.status == 409
    for name, tier in [('a', 'x'), ('b', 'x'), ('d', 'y')]:
        await api.post(CMS, {**configmap(name), 'metadata': {'name': name, 'labels': {'tier': tier}}})
    result = await kubectl('delete', 'configmaps', '-l', 'tier=x')
    assert 'configmap "a" deleted' in result.stdout and 'configmap "b" deleted' in result.stdout
    names = {o['metadata']['name'] for o in (await api.get(CMS)).body['items']}
    assert names == {'c', 'd', 'kube-root-ca.crt'}
    reply = await api.delete(CMS, params={'labelSelector': 'tier=y'})
    assert reply.status == 200 and [o['metadata']['name'] for o in reply.body['items']] == ['d']


def owned(name: str, owner: dict, block: bool = False, finalizers: list[str] | None = None) -> dict:
    meta = {
        'name': name,
        'ownerReferences': [
            {
                'apiVersion': 'v1',
                'kind': 'ConfigMap',
                'name': owner['metadata']['name'],
                'uid': owner['metadata']['uid'],
                'blockOwnerDeletion': block,
            }
        ],
    }
    if finalizers:
        meta['finalizers'] = finalizers
    return {'apiVersion': 'v1', 'kind': 'ConfigMap', 'metadata': meta}


async def test_garbage_collection_background(api):
    owner = (await api.post(CMS, configmap('owner'))).body
    await api.post(CMS, owned('child', owner))
    await api.post(CMS, owned('grandchild', (await api.get(f'{CMS}/child')).body))
    await api.post(CMS, owned('blocked', owner, finalizers=['test/keep']))
    await api.delete(f'{CMS}/owner')
    assert (await api.get(f'{CMS}/child')).status == 404
    assert (await api.get(f'{CMS}/grandchild')).status == 404
    blocked = (await api.get(f'{CMS}/blocked')).body
    assert blocked['metadata']['deletionTimestamp']  # respects its own finalizers


async def test_garbage_collection_foreground_and_orphan(api):
    owner = (await api.post(CMS, configmap('owner'))).body
    await api.post(CMS, owned('child', owner, block=True, finalizers=['test/keep']))
    reply = await api.delete(f'{CMS}/owner', {'propagationPolicy': 'Foreground'})
    assert 'foregroundDeletion' in reply.body['metadata']['finalizers']
    assert (await api.get(f'{CMS}/owner')).status == 200  # waits for the blocking child
    assert (await api.get(f'{CMS}/child')).body['metadata']['deletionTimestamp']
    await api.patch(f'{CMS}/child', {'metadata': {'finalizers': None}})
    assert (await api.get(f'{CMS}/child')).status == 404
    assert (await api.get(f'{CMS}/owner')).status == 404

    owner = (await api.post(CMS, configmap('owner2'))).body
    await api.post(CMS, owned('kept', owner))
    await api.delete(f'{CMS}/owner2', params={'propagationPolicy': 'Orphan'})
    assert (await api.get(f'{CMS}/owner2')).status == 404
    kept = (await api.get(f'{CMS}/kept')).body
    assert 'ownerReferences' not in kept['metadata']


async def test_namespaces(api, kubectl):
    reply = await api.post('/api/v1/namespaces/missing/configmaps', configmap('c', namespace='missing'))
    assert reply.status == 404 and reply.body['message'] == 'namespaces "missing" not found'
    await api.post('/api/v1/namespaces', {'apiVersion': 'v1', 'kind': 'Namespace', 'metadata': {'name': 'ns1'}})
    assert (await api.get('/api/v1/namespaces/ns1/serviceaccounts/default')).status == 200
    names = {o['metadata']['name'] for o in (await api.get('/api/v1/namespaces')).body['items']}
    assert {'default', 'kube-system', 'kube-public', 'kube-node-lease', 'ns1'} <= names
    await api.post('/api/v1/namespaces/ns1/configmaps', configmap('a', namespace='ns1'))
    await api.post(
        '/api/v1/namespaces/ns1/configmaps',
        {
            **configmap('b', namespace='ns1'),
            'metadata': {'name': 'b', 'namespace': 'ns1', 'finalizers': ['test/keep']},
        },
    )
    reply = await api.delete('/api/v1/namespaces/ns1')
    assert reply.body['status']['phase'] == 'Terminating'
    assert (await api.get('/api/v1/namespaces/ns1/configmaps/a')).status == 404
    reply = await api.post('/api/v1/namespaces/ns1/configmaps', configmap('new', namespace='ns1'))
    assert reply.status == 403 and 'is being terminated' in reply.body['message']
    assert (await api.get('/api/v1/namespaces/ns1')).status == 200  # blocked by b's finalizer
    await api.patch('/api/v1/namespaces/ns1/configmaps/b', {'metadata': {'finalizers': None}})
    assert (await api.get('/api/v1/namespaces/ns1')).status == 404
    result = await kubectl('get', 'ns', 'ns1', check=False)
    assert 'Error from server (NotFound): namespaces "ns1" not found' in result.stderr


async def test_selectors(api):
    for name, labels in [('a', {'app': 'x', 'tier': 'web'}), ('b', {'app': 'y'}), ('c', {})]:
        await api.post(CMS, {**configmap(name), 'metadata': {'name': name, 'labels': labels}})

    async def names(**params):
        reply = await api.get(CMS, params=params)
        assert reply.status == 200, reply.body
        return sorted(o['metadata']['name'] for o in reply.body['items'] if o['metadata']['name'] != 'kube-root-ca.crt')

    assert await names(labelSelector='app=x') == ['a']
    assert await names(labelSelector='app==x') == ['a']
    assert await names(labelSelector='app!=x') == ['b', 'c']
    assert await names(labelSelector='app in (x,y)') == ['a', 'b']
    assert await names(labelSelector='app notin (x)') == ['b', 'c']
    assert await names(labelSelector='tier') == ['a']
    assert await names(labelSelector='!tier') == ['b', 'c']
    assert await names(labelSelector='app,!tier') == ['b']
    assert await names(fieldSelector='metadata.name=b') == ['b']
    assert await names(fieldSelector='metadata.name!=b,metadata.namespace=default') == ['a', 'c']
    reply = await api.get(CMS, params={'fieldSelector': 'data.x=1'})
    assert reply.status == 400 and 'field label not supported: data.x' in reply.body['message']
    assert (await api.get(CMS, params={'labelSelector': 'a b c'})).status == 400
    pod = {
        'apiVersion': 'v1',
        'kind': 'Pod',
        'metadata': {'name': 'p'},
        'spec': {'nodeName': 'n1', 'containers': [{'name': 'c', 'image': 'x:1'}]},
    }
    await api.post('/api/v1/namespaces/default/pods', pod)
    reply = await api.get('/api/v1/pods', params={'fieldSelector': 'status.phase=Pending,spec.nodeName=n1'})
    assert [o['metadata']['name'] for o in reply.body['items']] == ['p']


async def test_list_pagination(api):
    for i in range(5):
        await api.post(CMS, configmap(f'c{i}'))
    seen, params = [], {'limit': '2'}
    while True:
        reply = (await api.get(CMS, params=params)).body
        seen += [o['metadata']['name'] for o in reply['items']]
        if not reply['metadata'].get('continue'):
            break
        assert reply['metadata']['remainingItemCount'] > 0
        params = {'limit': '2', 'continue': reply['metadata']['continue']}
    assert seen == ['c0', 'c1', 'c2', 'c3', 'c4', 'kube-root-ca.crt']
    assert (await api.get(CMS, params={'continue': 'garbage'})).status == 400


async def test_builtin_defaults_and_validation(api):
    reply = await api.post(JOBS, job('bad', restart_policy=None))
    assert reply.status == 422
    assert reply.body['details']['causes'][0]['field'] == 'spec.template.spec.restartPolicy'
    spec = (await api.post(JOBS, job('j'))).body['spec']
    assert (spec['backoffLimit'], spec['completions'], spec['parallelism']) == (6, 1, 1)
    assert spec['template']['metadata']['labels']['job-name'] == 'j'
    pod = {
        'apiVersion': 'v1',
        'kind': 'Pod',
        'metadata': {'name': 'p'},
        'spec': {'containers': [{'name': 'c', 'image': 'x:1'}]},
    }
    pod = (await api.post('/api/v1/namespaces/default/pods', pod)).body
    assert pod['spec']['restartPolicy'] == 'Always' and pod['status']['phase'] == 'Pending'
    svc = {
        'apiVersion': 'v1',
        'kind': 'Service',
        'metadata': {'name': 's'},
        'spec': {'ports': [{'port': 80}]},
    }
    svc = (await api.post('/api/v1/namespaces/default/services', svc)).body
    assert svc['spec']['type'] == 'ClusterIP' and svc['spec']['clusterIP'].startswith('10.')
    assert svc['spec']['ports'][0]['targetPort'] == 80
    assert (await api.post(DEPLOYS, deployment('d'))).body['spec']['replicas'] == 1
    secret = {'apiVersion': 'v1', 'kind': 'Secret', 'metadata': {'name': 's'}, 'stringData': {'k': 'v'}}
    secret = (await api.post('/api/v1/namespaces/default/secrets', secret)).body
    assert secret['data'] == {'k': 'dg=='} and secret['type'] == 'Opaque' and 'stringData' not in secret


async def test_dry_run(api):
    reply = await api.post(CMS, configmap('c'), params={'dryRun': 'All'})
    assert reply.status == 201 and (await api.get(f'{CMS}/c')).status == 404
    obj = (await api.post(CMS, configmap('c', a='1'))).body
    reply = await api.patch(f'{CMS}/c', {'data': {'a': '2'}}, params={'dryRun': 'All'})
    assert reply.body['data'] == {'a': '2'}
    current = (await api.get(f'{CMS}/c')).body
    assert current['data'] == {'a': '1'}
    assert current['metadata']['resourceVersion'] == obj['metadata']['resourceVersion']
    await api.delete(f'{CMS}/c', params={'dryRun': 'All'})
    assert (await api.get(f'{CMS}/c')).status == 200


async def test_fault_injection_takes_precedence(cluster, api):
    await api.post(JOBS, job('j'))
    cluster['patch', kmock.resource('batch', 'v1', 'jobs')] << 500
    assert (await api.patch(f'{JOBS}/j', {'metadata': {'labels': {'a': 'b'}}})).status == 500
    assert (await api.get(f'{JOBS}/j')).status == 200
    assert 'labels' not in (await api.get(f'{JOBS}/j')).body['metadata']


async def test_admission_chain_and_users(cluster, api, monkeypatch):
    calls = []

    async def fake_admission(**kwargs):
        calls.append(kwargs)
        obj = kwargs['obj']
        if kwargs['operation'] == 'CREATE' and obj['metadata']['name'] == 'denied':
            raise hooks.AdmissionDenied('denied') if hooks.AVAILABLE.get('admission') else _Denied()
        if obj is not None:
            obj.setdefault('metadata', {}).setdefault('labels', {})['mutated'] = 'yes'
        return obj

    class _Denied(Exception):
        status, reason, message = 403, 'Forbidden', 'admission webhook "x" denied the request: no'

    monkeypatch.setattr(hooks, 'run_admission', fake_admission)
    if not hooks.AVAILABLE.get('admission'):
        monkeypatch.setattr(hooks, 'AdmissionDenied', _Denied)
    alice = {'Authorization': f'Bearer {cluster.add_user("alice", ["devs"])}'}
    await api.post('/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings', {
        'metadata': {'name': 'devs-edit'}, 'roleRef': {'apiGroup': 'rbac.authorization.k8s.io', 'kind': 'ClusterRole',
                                                       'name': 'edit'},
        'subjects': [{'apiGroup': 'rbac.authorization.k8s.io', 'kind': 'Group', 'name': 'devs'}]})
    reply = await api.post(CMS, configmap('c'), headers=alice)
    assert reply.body['metadata']['labels'] == {'mutated': 'yes'}
    assert calls[-1]['user_info'] == {'username': 'alice', 'groups': ['devs', 'system:authenticated']}
    assert calls[-1]['operation'] == 'CREATE' and calls[-1]['dry_run'] is False
    await api.patch(f'{CMS}/c', {'data': {'a': '1'}}, params={'dryRun': 'All'})
    assert calls[-1]['operation'] == 'UPDATE' and calls[-1]['dry_run'] is True
    assert calls[-1]['old_obj']['metadata']['name'] == 'c'
    await api.delete(f'{CMS}/c')
    assert calls[-1]['operation'] == 'DELETE' and calls[-1]['obj'] is None
    assert calls[-1]['user_info']['username'] == 'kubernetes-admin'
    reply = await api.post(CMS, configmap('denied'))
    assert reply.status == 403 and reply.body['kind'] == 'Status'


async def test_access_reviews(cluster, api, monkeypatch):
    seen = []

    async def fake_review(cluster_, sar):
        seen.append(sar)
        return {**sar, 'status': {'allowed': sar['spec'].get('user') == 'alice'}}

    monkeypatch.setattr(hooks, 'review', fake_review)
    body = {
        'apiVersion': 'authorization.k8s.io/v1',
        'kind': 'SubjectAccessReview',
        'spec': {'user': 'alice', 'resourceAttributes': {'verb': 'get', 'resource': 'pods'}},
    }
    reply = await api.post('/apis/authorization.k8s.io/v1/subjectaccessreviews', body)
    assert reply.status == 201 and reply.body['status'] == {'allowed': True}
    body = {
        'apiVersion': 'authorization.k8s.io/v1',
        'kind': 'SelfSubjectAccessReview',
        'spec': {'resourceAttributes': {'verb': 'get', 'resource': 'pods'}},
    }
    reply = await api.post(
        '/apis/authorization.k8s.io/v1/selfsubjectaccessreviews', body,
        headers={'Authorization': f'Bearer {cluster.add_user("bob")}'}
    )
    assert reply.body['status'] == {'allowed': False} and seen[-1]['spec']['user'] == 'bob'
    assert (await api.get('/apis/authorization.k8s.io/v1/subjectaccessreviews')).status == 405


async def test_crd_lifecycle_and_discovery(api, kubectl):
    created = await make_crd(api)
    conditions = {c['type']: c['status'] for c in created['status']['conditions']}
    assert conditions == {'NamesAccepted': 'True', 'Established': 'True'}
    group = (await api.get(f'/apis/{GROUP}')).body
    assert group['preferredVersion']['version'] == 'v1'
    resources = {r['name']: r for r in (await api.get(f'/apis/{GROUP}/v1')).body['resources']}
    assert resources['agentsessions']['shortNames'] == ['asess'] and resources['agentsessions']['namespaced']
    assert resources['agentsessions/status']['verbs'] == ['get', 'patch', 'update']
    core = {r['name']: r for r in (await api.get('/api/v1')).body['resources']}
    assert core['pods']['shortNames'] == ['po'] and 'pods/status' in core and 'pods/log' in core
    result = await kubectl('api-resources', '--api-group', GROUP)
    assert 'agentsessions' in result.stdout and 'asess' in result.stdout
    await api.post(CRS, {**cr('s1'), 'metadata': {'name': 's1', 'finalizers': ['test/keep']}})
    await api.delete(f'{CRDS}/agentsessions.{GROUP}')
    assert (await api.get(f'{CRDS}/agentsessions.{GROUP}')).status == 200  # waits for s1's finalizer
    await api.patch(f'{CRS}/s1', {'metadata': {'finalizers': None}})
    assert (await api.get(f'{CRDS}/agentsessions.{GROUP}')).status == 404
    assert (await api.get(f'/apis/{GROUP}/v1')).status == 404
    assert (await api.get(CRS)).status == 404


async def test_version_health_openapi(api):
    version = (await api.get('/version')).body
    assert (version['major'], version['minor']) == ('1', '31')
    for path in ('/healthz', '/readyz', '/livez'):
        reply = await api.get(path)
        assert (reply.status, reply.body) == (200, 'ok')
    await make_crd(api)
    root = (await api.get('/openapi/v3')).body
    url = root['paths'][f'apis/{GROUP}/v1']['serverRelativeURL']
    doc = (await api.get(url)).body
    schema = doc['components']['schemas']['dev.sessionops.example.v1.AgentSession']
    assert schema['properties']['spec']['properties']['model']['description'] == 'The model that runs the agent.'
    v2 = (await api.get('/openapi/v2')).body
    assert 'io.k8s.api.batch.v1.Job' in v2['definitions']


async def test_client_errors_never_500(api):
    await make_crd(api)
    await api.post(CMS, configmap('c'))
    await api.post(CRS, cr('s1'))
    bad = [
        ('POST', CMS, b'{not json', 'application/json'),
        ('POST', CMS, b'[1, 2]', 'application/json'),
        ('POST', CMS, {'metadata': 'string'}, 'application/json'),
        ('POST', CMS, {'metadata': {'name': 'x', 'labels': ['a']}}, 'application/json'),
        ('POST', CMS, {'metadata': {'name': 'y', 'finalizers': 'abc'}}, 'application/json'),
        ('POST', CMS, {'metadata': {'name': 'z', 'ownerReferences': [1]}}, 'application/json'),
        ('POST', CMS, {'apiVersion': 'v2', 'kind': 'ConfigMap', 'metadata': {'name': 'w'}}, 'application/json'),
        ('POST', CRS, {**cr('s2'), 'metadata': {'name': 's2', 'finalizers': [3]}}, 'application/json'),
        ('POST', JOBS, {'metadata': {'name': 'j'}, 'spec': 'nope'}, 'application/json'),
        ('POST', DEPLOYS, {'metadata': {'name': 'd'}, 'spec': {'template': 5}}, 'application/json'),
        ('PUT', f'{CMS}/c', {'metadata': {'name': 'other'}}, 'application/json'),
        ('PATCH', f'{CMS}/c', [{'op': 'replace', 'path': '/metadata', 'value': 1}], 'application/json-patch+json'),
        ('PATCH', f'{CMS}/c', [{'op': 'bogus', 'path': '/x'}], 'application/json-patch+json'),
        ('PATCH', f'{CMS}/c', {'metadata': {'ownerReferences': {'a': 1}}}, 'application/merge-patch+json'),
        ('PATCH', f'{CMS}/c', [1, 2], 'application/merge-patch+json'),
        ('PATCH', f'{CMS}/c', {'x': 1}, 'text/plain'),
        ('PATCH', f'{CMS}/c', b'a: [', 'application/apply-patch+yaml'),
        ('PATCH', f'{CRS}/s1', {'metadata': {'finalizers': [None]}}, 'application/merge-patch+json'),
        ('PATCH', f'{CRS}/s1/status', b'"str"', 'application/merge-patch+json'),
        ('DELETE', f'{CMS}/c', {'propagationPolicy': 'Sideways'}, 'application/json'),
        ('DELETE', f'{CMS}/c', b'[]', 'application/json'),
        ('GET', f'{CMS}?watch=true&resourceVersion=abc', None, 'application/json'),
        ('GET', f'{CMS}?limit=x', None, 'application/json'),
        ('GET', '/apis/nope/v1/things', None, 'application/json'),
        ('GET', '/api/v1/namespaces/default/pods/p/exec', None, 'application/json'),
        ('PUT', CMS, {}, 'application/json'),
        ('POST', f'{CMS}/c', {}, 'application/json'),
        ('POST', CMS, b'k8s\x00garbage', 'application/vnd.kubernetes.protobuf'),
    ]
    for method, path, body, content_type in bad:
        reply = await api.request(method, path, body, content_type=content_type)
        assert 400 <= reply.status < 500, (method, path, body, reply.status, reply.body)
        assert reply.body['kind'] == 'Status', (method, path, reply.body)


async def test_field_validation_is_passed_to_the_schema_module(api, monkeypatch):
    seen = []
    original = hooks.admit_custom_object

    def spy(crd_, version, obj, old, *, field_validation='Strict'):
        seen.append(field_validation)
        return original(crd_, version, obj, old, field_validation=field_validation)

    monkeypatch.setattr(hooks, 'admit_custom_object', spy)
    await make_crd(api)
    body = {**cr('s1'), 'spec': {'model': 'm', 'unknownField': 1}}
    strict = await api.post(CRS, body, params={'fieldValidation': 'Strict'})
    if hooks.AVAILABLE.get('schema'):
        assert strict.status == 400 and 'unknownField' in strict.body['message']   # strict decoding error
        warn = await api.post(CRS, body, params={'fieldValidation': 'Warn'})
        assert warn.status == 201 and any('unknownField' in w for w in warn.warnings)
        assert 'unknownField' not in warn.body['spec']
        ignore = await api.post(CRS, {**body, 'metadata': {'name': 's2'}}, params={'fieldValidation': 'Ignore'})
        assert ignore.status == 201 and not ignore.warnings
    assert seen[0] == 'Strict' and 'Warn' in seen and 'Ignore' in seen
    seen.clear()
    await api.post(CRS, {**body, 'metadata': {'name': 's3'}})
    assert seen[0] == 'Warn'   # the real server's default when the request does not say


async def test_service_resolver(cluster):
    cluster.service_endpoints[('sessionops-system', 'sessionops-webhook')] = ('127.0.0.1', 9443)
    assert cluster.service_resolver('sessionops-system', 'sessionops-webhook', 443) == ('127.0.0.1', 9443)
    assert cluster.get_object('', 'v1', 'namespaces', None, 'default')['metadata']['name'] == 'default'
    assert {o['metadata']['name'] for o in cluster.list_objects('', 'v1', 'serviceaccounts')} == {'default'}


async def test_size_limits_of_requests_stored_objects_and_annotations(api):
    """As kube-apiserver with etcd's defaults: 413 over 3 MiB of body, etcd's 500 for an object over
    1.5 MiB (counted as Go's JSON encoder writes it: ``<`` takes six bytes), 422 for annotations over 256 KiB."""
    reply = await api.post(CMS, {**configmap('huge'), 'data': {'a': 'x' * (3 * 1024 * 1024)}})
    assert (reply.status, reply.body['reason'], reply.body['message']) == \
        (413, 'RequestEntityTooLarge', 'Request entity too large: limit is 3145728')
    reply = await api.post(CMS, {**configmap('big'), 'data': {'a': 'x' * (1536 * 1024)}})
    assert (reply.status, reply.body['message']) == (500, 'etcdserver: request is too large')
    reply = await api.post(CMS, {**configmap('escaped'), 'data': {'a': '<' * (300 * 1024)}})
    assert reply.status == 500
    fits = await api.post(CMS, {**configmap('fits'), 'data': {'a': 'x' * (1400 * 1024)}})
    assert fits.status == 201
    reply = await api.patch(f'{CMS}/fits', {'data': {'b': 'y' * (200 * 1024)}})
    assert reply.status == 500 and (await api.get(f'{CMS}/fits')).body['data'].keys() == {'a'}
    reply = await api.patch(f'{CMS}/fits', {'metadata': {'annotations': {'a': 'z' * (256 * 1024)}}})
    assert reply.status == 422
    assert reply.body['details']['causes'][0] == {
        'field': 'metadata.annotations', 'reason': 'FieldValueTooLong',
        'message': 'Too long: may not be more than 262144 bytes'}
    assert (await api.patch(f'{CMS}/fits', {'metadata': {'labels': {'still': 'manageable'}}})).status == 200
