"""The test cluster authenticates and authorizes like a real one: tokens, impersonation, RBAC, access reviews.

Driven through the real kubectl wherever a person would use it."""

from __future__ import annotations

from pathlib import Path

from binaries import binary, run
from testcluster import rbac

SAR = '/apis/authorization.k8s.io/v1/subjectaccessreviews'
SSAR = '/apis/authorization.k8s.io/v1/selfsubjectaccessreviews'


async def as_token(cluster, tmp_path: Path, token: str, *args: str, check: bool = False):
    """kubectl with a kubeconfig that carries ``token`` (a person's or a ServiceAccount's)."""
    config = cluster.write_kubeconfig(tmp_path / f'kc-{abs(hash(token))}', token=token, remember=False)
    return await run(binary('kubectl'), '--kubeconfig', str(config), '--cache-dir', str(tmp_path / 'cache'),
                     *args, check=check)


def sar(user: str, groups: list[str] | None = None, **attrs: str) -> dict:
    resource = {'verb': 'get', 'group': '', 'resource': 'pods', 'namespace': 'team-a', **attrs}
    return {'apiVersion': 'authorization.k8s.io/v1', 'kind': 'SubjectAccessReview',
            'spec': {'user': user, 'groups': groups or [], 'resourceAttributes': resource}}


async def test_kubectl_as_alice_is_refused_what_she_is_not_bound_to_and_allowed_what_she_is(kubectl):
    await kubectl('create', 'namespace', 'team-a')
    await kubectl('create', 'namespace', 'team-b')
    await kubectl('create', 'rolebinding', 'alice-edit', '--clusterrole=edit', '--user=alice', '-n', 'team-a')
    assert (await kubectl('--as=alice', 'create', 'configmap', 'notes', '-n', 'team-a')).returncode == 0
    refused = await kubectl('--as=alice', 'create', 'configmap', 'notes', '-n', 'team-b', check=False)
    assert refused.returncode == 1
    assert refused.stderr.strip() == (
        'error: failed to create configmap: configmaps is forbidden: User "alice" cannot create resource '
        '"configmaps" in API group "" in the namespace "team-b"')
    refused = await kubectl('--as=alice', 'get', 'configmap', 'notes', '-n', 'team-b', check=False)
    assert refused.stderr.strip() == ('Error from server (Forbidden): configmaps "notes" is forbidden: User "alice" '
                                      'cannot get resource "configmaps" in API group "" in the namespace "team-b"')
    # edit includes view but not admin: alice may read RoleBindings of team-a only through admin.
    refused = await kubectl('--as=alice', 'get', 'rolebindings', '-n', 'team-a', check=False)
    assert 'cannot list resource "rolebindings" in API group "rbac.authorization.k8s.io"' in refused.stderr
    assert (await kubectl('--as=alice', 'auth', 'can-i', 'delete', 'configmaps', '-n', 'team-a')).stdout == 'yes\n'
    no = await kubectl('--as=alice', 'auth', 'can-i', 'delete', 'configmaps', '-n', 'team-b', check=False)
    assert no.stdout == 'no\n'


async def test_a_group_binding_applies_to_an_impersonated_group(kubectl):
    await kubectl('create', 'namespace', 'team-a')
    await kubectl('create', 'rolebinding', 'team-view', '--clusterrole=view', '--group=team-a', '-n', 'team-a')
    without = await kubectl('--as=alice', 'get', 'pods', '-n', 'team-a', check=False)
    assert 'User "alice" cannot list resource "pods"' in without.stderr
    with_group = await kubectl('--as=alice', '--as-group=team-a', 'get', 'pods', '-n', 'team-a')
    assert with_group.returncode == 0


async def test_impersonation_needs_the_impersonate_verb(cluster, api, kubectl, tmp_path):
    alice = cluster.add_user('alice')
    refused = await api.get('/api/v1/pods', headers={'Authorization': f'Bearer {alice}', 'Impersonate-User': 'bob'})
    assert refused.status == 403 and refused['message'] == (
        'users "bob" is forbidden: User "alice" cannot impersonate resource "users" in API group "" at the cluster '
        'scope')
    # kubectl's discovery fails first (it reports the 403 of /api as "unknown").
    assert (await as_token(cluster, tmp_path, alice, '--as=bob', 'get', 'pods')).returncode == 1
    await kubectl('create', 'clusterrole', 'impersonate-bob', '--verb=impersonate', '--resource=users',
                  '--resource-name=bob')
    await kubectl('create', 'clusterrolebinding', 'alice-as-bob', '--clusterrole=impersonate-bob', '--user=alice')
    await kubectl('create', 'clusterrolebinding', 'bob-view', '--clusterrole=view', '--user=bob')
    assert (await as_token(cluster, tmp_path, alice, '--as=bob', 'get', 'pods')).returncode == 0
    refused = await api.get('/api/v1/pods', headers={'Authorization': f'Bearer {alice}', 'Impersonate-User': 'bob',
                                                     'Impersonate-Group': 'admins'})
    assert 'User "alice" cannot impersonate resource "groups"' in refused['message']
    assert (await as_token(cluster, tmp_path, alice, '--as=carol', 'get', 'pods')).returncode == 1
    grouped = await api.get('/api/v1/pods', headers={'Impersonate-Group': 'admins'})
    assert grouped.status == 500 and 'without impersonating a user' in grouped['message']


async def test_requests_without_or_with_unknown_credentials(cluster, api, tmp_path):
    anonymous = await api.get('/api/v1/namespaces/default/pods', headers={'Authorization': ''})
    assert anonymous.status == 403
    assert anonymous['message'] == ('pods is forbidden: User "system:anonymous" cannot list resource "pods" in API '
                                    'group "" in the namespace "default"')
    assert (await api.get('/version', headers={'Authorization': ''})).status == 200
    unknown = await api.get('/api/v1/pods', headers={'Authorization': 'Bearer nope'})
    assert unknown.status == 401 and unknown['reason'] == 'Unauthorized'
    assert (await as_token(cluster, tmp_path, 'nope', 'get', 'pods')).returncode == 1


async def test_service_account_tokens_authenticate_as_the_service_account(cluster, kubectl, tmp_path):
    await kubectl('create', 'namespace', 'team-a')
    await kubectl('create', 'serviceaccount', 'robot', '-n', 'team-a')
    token = (await kubectl('create', 'token', 'robot', '-n', 'team-a')).stdout.strip()
    refused = await as_token(cluster, tmp_path, token, 'get', 'pods', '-n', 'team-a')
    assert ('User "system:serviceaccount:team-a:robot" cannot list resource "pods" in API group "" in the namespace '
            '"team-a"') in refused.stderr
    await kubectl('create', 'rolebinding', 'robot-view', '--clusterrole=view', '--serviceaccount=team-a:robot',
                  '-n', 'team-a')
    assert (await as_token(cluster, tmp_path, token, 'get', 'pods', '-n', 'team-a')).returncode == 0
    await kubectl('delete', 'serviceaccount', 'robot', '-n', 'team-a')
    assert (await as_token(cluster, tmp_path, token, 'get', 'pods', '-n', 'team-a')).returncode == 1


async def test_a_pod_bound_token_carries_the_pod_and_ends_with_it(cluster, api, kubectl):
    await kubectl('create', 'namespace', 'team-a')
    await kubectl('create', 'serviceaccount', 'worker', '-n', 'team-a')
    pod = {'metadata': {'name': 'w-1'}, 'spec': {'serviceAccountName': 'worker',
                                                 'containers': [{'name': 'c', 'image': 'python'}]}}
    created = (await api.post('/api/v1/namespaces/team-a/pods', pod)).body
    request = {'apiVersion': 'authentication.k8s.io/v1', 'kind': 'TokenRequest',
               'spec': {'boundObjectRef': {'kind': 'Pod', 'apiVersion': 'v1', 'name': 'w-1'},
                        'expirationSeconds': 3600}}
    issued = await api.post('/api/v1/namespaces/team-a/serviceaccounts/worker/token', request)
    assert issued.status == 201 and issued['spec']['boundObjectRef']['uid'] == created['metadata']['uid']
    bearer = {'Authorization': f'Bearer {issued["status"]["token"]}'}
    review = {'apiVersion': 'authorization.k8s.io/v1', 'kind': 'SelfSubjectAccessReview',
              'spec': {'resourceAttributes': {'verb': 'get', 'resource': 'pods', 'namespace': 'team-a'}}}
    assert (await api.post(SSAR, review, headers=bearer)).status == 201
    seen = cluster.access_reviews[-1]
    assert seen['user'] == 'system:serviceaccount:team-a:worker' and seen['allowed'] is False
    assert 'system:serviceaccounts:team-a' in seen['groups']
    await api.delete('/api/v1/namespaces/team-a/pods/w-1')
    assert (await api.post(SSAR, review, headers=bearer)).status == 401
    missing = dict(request, spec={'boundObjectRef': {'kind': 'Pod', 'name': 'w-1'}})
    assert (await api.post('/api/v1/namespaces/team-a/serviceaccounts/worker/token', missing)).status == 404
    short = dict(request, spec={'expirationSeconds': 60})
    assert (await api.post('/api/v1/namespaces/team-a/serviceaccounts/worker/token', short)).status == 422


async def test_access_reviews_are_answered_by_rbac(cluster, api, kubectl):
    await kubectl('create', 'namespace', 'team-a')
    assert (await api.post(SAR, sar('alice'))).body['status'] == {'allowed': False}
    await kubectl('create', 'rolebinding', 'alice-view', '--clusterrole=view', '--user=alice', '-n', 'team-a')
    status = (await api.post(SAR, sar('alice'))).body['status']
    assert status == {'allowed': True,
                      'reason': 'RBAC: allowed by RoleBinding "alice-view/team-a" of ClusterRole "view" to User "alice"'}
    assert (await api.post(SAR, sar('alice', namespace='team-b'))).body['status']['allowed'] is False
    assert (await api.post(SAR, sar('root', ['system:masters'], verb='delete'))).body['status']['allowed'] is True
    bad = {'apiVersion': 'authorization.k8s.io/v1', 'kind': 'SubjectAccessReview', 'spec': {'user': 'alice'}}
    assert (await api.post(SAR, bad)).status == 422
    assert cluster.access_reviews[-1]['user'] == 'root'
    # Reviewing others is itself a permission: alice may only ask about herself.
    alice = {'Authorization': f'Bearer {cluster.add_user("alice")}'}
    assert (await api.post(SAR, sar('bob'), headers=alice)).status == 403
    own = {'apiVersion': 'authorization.k8s.io/v1', 'kind': 'SelfSubjectAccessReview',
           'spec': {'resourceAttributes': {'verb': 'list', 'resource': 'pods', 'namespace': 'team-a'}}}
    assert (await api.post(SSAR, own, headers=alice)).body['status']['allowed'] is True


async def test_cluster_roles_are_aggregated_into_the_roles_that_select_them(api, kubectl):
    await kubectl('create', 'namespace', 'team-a')
    await kubectl('create', 'rolebinding', 'alice-edit', '--clusterrole=edit', '--user=alice', '-n', 'team-a')
    widgets = {'apiGroups': ['networking.k8s.io'], 'resources': ['networkpolicies'], 'verbs': ['get', 'list']}
    assert (await kubectl('--as=alice', 'auth', 'can-i', 'list', 'networkpolicies.networking.k8s.io', '-n', 'team-a',
                          check=False)).stdout == 'no\n'
    await api.post('/apis/rbac.authorization.k8s.io/v1/clusterroles', {
        'metadata': {'name': 'widgets-view', 'labels': {'rbac.authorization.k8s.io/aggregate-to-view': 'true'}},
        'rules': [widgets]})
    for aggregated in ('view', 'edit', 'admin'):
        role = (await api.get(f'/apis/rbac.authorization.k8s.io/v1/clusterroles/{aggregated}')).body
        assert widgets in role['rules'], aggregated
    assert (await kubectl('--as=alice', 'auth', 'can-i', 'list', 'networkpolicies.networking.k8s.io', '-n', 'team-a')).stdout \
        == 'yes\n'
    await api.delete('/apis/rbac.authorization.k8s.io/v1/clusterroles/widgets-view')
    view = (await api.get('/apis/rbac.authorization.k8s.io/v1/clusterroles/view')).body
    assert widgets not in view['rules']
    assert rbac.MASTERS in (await api.get(
        '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/cluster-admin')).body['subjects'][0]['name']


async def test_nobody_grants_permissions_they_do_not_hold(cluster, kubectl, tmp_path):
    await kubectl('create', 'namespace', 'team-a')
    await kubectl('create', 'rolebinding', 'alice-admin', '--clusterrole=admin', '--user=alice', '-n', 'team-a')
    alice = cluster.add_user('alice', ['devs'])
    held = await as_token(cluster, tmp_path, alice, 'create', 'role', 'cm-reader', '--verb=get',
                          '--resource=configmaps', '-n', 'team-a')
    assert held.returncode == 0, held.stderr
    refused = await as_token(cluster, tmp_path, alice, 'create', 'role', 'secrets-all', '--verb=*',
                             '--resource=secrets', '-n', 'team-a')
    assert refused.returncode == 1
    assert ('roles.rbac.authorization.k8s.io "secrets-all" is forbidden: user "alice" (groups=["devs" '
            '"system:authenticated"]) is attempting to grant RBAC permissions not currently held:\n'
            '{APIGroups:[""], Resources:["secrets"], Verbs:["*"]}') in refused.stderr
    # Binding a role is granting its rules: edit is within admin, cluster-admin is not.
    assert (await as_token(cluster, tmp_path, alice, 'create', 'rolebinding', 'bob-edit', '--clusterrole=edit',
                           '--user=bob', '-n', 'team-a')).returncode == 0
    refused = await as_token(cluster, tmp_path, alice, 'create', 'rolebinding', 'bob-root',
                             '--clusterrole=cluster-admin', '--user=bob', '-n', 'team-a')
    assert 'is attempting to grant RBAC permissions not currently held' in refused.stderr
    # ... unless she may `bind` that role.
    await kubectl('create', 'clusterrole', 'bind-root', '--verb=bind', '--resource=clusterroles',
                  '--resource-name=cluster-admin')
    await kubectl('create', 'rolebinding', 'alice-bind-root', '--clusterrole=bind-root', '--user=alice', '-n', 'team-a')
    assert (await as_token(cluster, tmp_path, alice, 'create', 'rolebinding', 'bob-root',
                           '--clusterrole=cluster-admin', '--user=bob', '-n', 'team-a')).returncode == 0
