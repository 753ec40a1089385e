"""The RBAC authorizer's decisions, as sentences (pure: stored objects in, a decision out)."""

from __future__ import annotations

import dataclasses

import pytest

from testcluster import rbac
from testcluster.rbac import Attributes, Objects, UserInfo

ALICE = UserInfo('alice', ('team-a-devs', 'system:authenticated'))
BOB = UserInfo('bob', ('system:authenticated',))
WORKER = UserInfo('system:serviceaccount:team-a:sessionops-worker',
                  ('system:serviceaccounts', 'system:serviceaccounts:team-a', 'system:authenticated'))


def role(name: str, rules: list[dict], namespace: str | None = None, labels: dict | None = None,
         aggregate: list[dict] | None = None) -> dict:
    meta: dict = {'name': name, 'labels': labels or {}}
    if namespace:
        meta['namespace'] = namespace
    obj: dict = {'metadata': meta, 'rules': rules}
    if aggregate is not None:
        obj['aggregationRule'] = {'clusterRoleSelectors': aggregate}
    return obj


def binding(name: str, kind: str, role_name: str, subjects: list[dict], namespace: str | None = None) -> dict:
    meta: dict = {'name': name}
    if namespace:
        meta['namespace'] = namespace
    return {'metadata': meta, 'roleRef': {'apiGroup': rbac.RBAC_GROUP, 'kind': kind, 'name': role_name},
            'subjects': subjects}


def user(name: str) -> dict:
    return {'apiGroup': rbac.RBAC_GROUP, 'kind': 'User', 'name': name}


INPUTS = {'apiGroups': ['sessionops.dev'], 'resources': ['agentinputs'], 'verbs': ['create', 'get']}
OBJECTS = Objects(
    roles=[role('inputs', [INPUTS], 'team-a'),
           role('leases', [{'apiGroups': ['coordination.k8s.io'], 'resources': ['leases'], 'verbs': ['*']}],
                'team-a'),
           role('one-secret', [{'apiGroups': [''], 'resources': ['secrets'], 'resourceNames': ['db'],
                                'verbs': ['get']}], 'team-a')],
    cluster_roles=[
        role('run-status', [{'apiGroups': ['sessionops.dev'], 'resources': ['agentruns/status'],
                             'verbs': ['patch']}]),
        role('any-log', [{'apiGroups': [''], 'resources': ['*/log'], 'verbs': ['get']}]),
        role('metrics', [{'nonResourceURLs': ['/metrics', '/debug/*'], 'verbs': ['get']}]),
        role('agent-reader', [{'apiGroups': ['sessionops.dev'], 'resources': ['agents'], 'verbs': ['get']}]),
    ],
    role_bindings=[
        binding('alice-inputs', 'Role', 'inputs', [user('alice')], 'team-a'),
        binding('devs-run-status', 'ClusterRole', 'run-status',
                [{'apiGroup': rbac.RBAC_GROUP, 'kind': 'Group', 'name': 'team-a-devs'}], 'team-a'),
        binding('worker-leases', 'Role', 'leases', [{'kind': 'ServiceAccount', 'name': 'sessionops-worker'}],
                'team-a'),
        binding('worker-secret', 'Role', 'one-secret',
                [{'kind': 'ServiceAccount', 'name': 'sessionops-worker', 'namespace': 'team-a'}], 'team-a'),
        binding('bob-missing-role', 'Role', 'no-such-role', [user('bob')], 'team-a'),
    ],
    cluster_role_bindings=[
        binding('bob-logs', 'ClusterRole', 'any-log', [user('bob')]),
        binding('bob-metrics', 'ClusterRole', 'metrics', [user('bob')]),
        binding('worker-agents', 'ClusterRole', 'agent-reader',
                [{'kind': 'Group', 'name': 'system:serviceaccounts:team-a', 'apiGroup': rbac.RBAC_GROUP}]),
    ],
)


def ask(who: UserInfo, verb: str, resource: str = 'agentinputs', *, group: str = 'sessionops.dev',
        namespace: str = 'team-a', name: str = '', sub: str = '') -> Attributes:
    return Attributes(user=who, verb=verb, api_group=group, resource=resource, subresource=sub,
                      namespace=namespace, name=name)


def url(who: UserInfo, path: str, verb: str = 'get') -> Attributes:
    return Attributes(user=who, verb=verb, resource_request=False, path=path)


CASES = [
    ('a RoleBinding to a Role grants its verbs in its namespace',
     ask(ALICE, 'create'), True),
    ('a verb the rule does not list is refused', ask(ALICE, 'delete', name='x'), False),
    ('the same rule does not reach another namespace', ask(ALICE, 'create', namespace='team-b'), False),
    ('a cluster-scoped request is outside every RoleBinding', ask(ALICE, 'create', namespace=''), False),
    ('another API group is another resource', ask(ALICE, 'create', group='other.dev'), False),
    ('another user is not bound', ask(BOB, 'create'), False),
    ('a Group subject applies to its members', ask(ALICE, 'patch', 'agentruns', sub='status', name='r'), True),
    ('a subresource rule does not grant the main resource', ask(ALICE, 'patch', 'agentruns', name='r'), False),
    ('"*/log" grants the log subresource of any resource',
     ask(BOB, 'get', 'pods', group='', sub='log', name='p'), True),
    ('"*/log" grants no other subresource', ask(BOB, 'get', 'pods', group='', sub='status', name='p'), False),
    ('a ServiceAccount subject without a namespace means the binding\'s namespace',
     ask(WORKER, 'update', 'leases', group='coordination.k8s.io', name='s'), True),
    ('a verb wildcard grants any verb, even a custom one',
     ask(WORKER, 'frobnicate', 'leases', group='coordination.k8s.io'), True),
    ('resourceNames grant the named object', ask(WORKER, 'get', 'secrets', group='', name='db'), True),
    ('resourceNames refuse any other name', ask(WORKER, 'get', 'secrets', group='', name='other'), False),
    ('resourceNames never grant a request without a name', ask(WORKER, 'list', 'secrets', group=''), False),
    ('a ClusterRoleBinding to a ServiceAccount group grants in every namespace',
     ask(WORKER, 'get', 'agents', namespace='team-z', name='a'), True),
    ('a binding to a missing role grants nothing', ask(BOB, 'get', 'agentinputs', name='i'), False),
    ('a non-resource URL matches exactly', url(BOB, '/metrics'), True),
    ('a non-resource URL ending in * matches by prefix', url(BOB, '/debug/pprof/heap'), True),
    ('a non-resource URL is matched with its verb', url(BOB, '/metrics', 'post'), False),
    ('a non-resource rule is not a resource rule', url(ALICE, '/metrics'), False),
]


@pytest.mark.parametrize(('sentence', 'attrs', 'allowed'), CASES, ids=[c[0] for c in CASES])
def test_rbac_decides(sentence: str, attrs: Attributes, allowed: bool) -> None:
    assert rbac.authorize(OBJECTS, attrs).allowed is allowed, sentence


def test_an_allowed_request_says_which_binding_allowed_it() -> None:
    reason = rbac.authorize(OBJECTS, ask(WORKER, 'get', 'secrets', group='', name='db')).reason
    assert reason == ('RBAC: allowed by RoleBinding "worker-secret/team-a" of Role "one-secret" to '
                      'ServiceAccount "team-a/sessionops-worker"')
    assert rbac.authorize(OBJECTS, ask(BOB, 'create')).reason == ''


@pytest.mark.parametrize(('attrs', 'message'), [
    (ask(BOB, 'create'), 'agentinputs.sessionops.dev is forbidden: User "bob" cannot create resource '
                         '"agentinputs" in API group "sessionops.dev" in the namespace "team-a"'),
    (ask(BOB, 'get', 'pods', group='', name='p', sub='exec'),
     'pods "p" is forbidden: User "bob" cannot get resource "pods/exec" in API group "" in the namespace "team-a"'),
    (ask(BOB, 'list', 'clusterroles', group=rbac.RBAC_GROUP, namespace=''),
     'clusterroles.rbac.authorization.k8s.io is forbidden: User "bob" cannot list resource "clusterroles" in API '
     'group "rbac.authorization.k8s.io" at the cluster scope'),
    (url(BOB, '/logs'), 'forbidden: User "bob" cannot get path "/logs"'),
], ids=['a namespaced list or create', 'a named subresource', 'a cluster-scoped resource', 'a path'])
def test_forbidden_messages_read_like_the_api_servers(attrs: Attributes, message: str) -> None:
    status = rbac.forbidden_status(attrs)
    assert status['message'] == message
    assert status['code'] == 403 and status['reason'] == 'Forbidden' and status['kind'] == 'Status'


def test_an_aggregated_cluster_role_collects_the_rules_of_the_roles_it_selects() -> None:
    view = role('view', [], aggregate=[{'matchLabels': {'rbac.authorization.k8s.io/aggregate-to-view': 'true'}}])
    ours = role('sessionops-view', [INPUTS], labels={'rbac.authorization.k8s.io/aggregate-to-view': 'true'})
    other = role('other', [{'apiGroups': [''], 'resources': ['pods'], 'verbs': ['get']}])
    twin = role('twin', [INPUTS], labels={'rbac.authorization.k8s.io/aggregate-to-view': 'true'})
    assert rbac.aggregated_rules(view, [view, ours, other, twin]) == [INPUTS]
    assert rbac.aggregated_rules(view, [view, other]) == []


def test_the_bootstrap_roles_nest_view_in_edit_in_admin() -> None:
    names = {r['metadata']['name']: r for r in rbac.BOOTSTRAP_CLUSTER_ROLES}
    edit_labels = names['edit']['metadata']['labels']
    view_labels = names['view']['metadata']['labels']
    assert edit_labels['rbac.authorization.k8s.io/aggregate-to-admin'] == 'true'
    assert view_labels['rbac.authorization.k8s.io/aggregate-to-edit'] == 'true'
    masters = [b for b in rbac.BOOTSTRAP_CLUSTER_ROLE_BINDINGS if b['metadata']['name'] == 'cluster-admin']
    assert masters[0]['subjects'][0]['name'] == rbac.MASTERS


def test_user_info_round_trips_through_the_review_shape() -> None:
    info = dataclasses.replace(WORKER, extra={'authentication.kubernetes.io/pod-name': ('p',)})
    assert UserInfo.of(info.as_dict()) == info


def test_granting_is_checked_rule_by_rule_against_what_the_requester_holds() -> None:
    wanted = [{'apiGroups': ['sessionops.dev'], 'resources': ['agentinputs'], 'verbs': ['create', 'delete']},
              {'apiGroups': [''], 'resources': ['secrets'], 'resourceNames': ['db'], 'verbs': ['get']}]
    assert rbac.not_held(OBJECTS, ALICE, wanted, 'team-a') == [
        '{APIGroups:["sessionops.dev"], Resources:["agentinputs"], Verbs:["delete"]}',
        '{APIGroups:[""], Resources:["secrets"], ResourceNames:["db"], Verbs:["get"]}']
    assert rbac.not_held(OBJECTS, WORKER, wanted[1:], 'team-a') == []
    # A grant of every name needs a rule without names.
    assert rbac.not_held(OBJECTS, WORKER, [{'apiGroups': [''], 'resources': ['secrets'], 'verbs': ['get']}],
                         'team-a') == ['{APIGroups:[""], Resources:["secrets"], Verbs:["get"]}']
