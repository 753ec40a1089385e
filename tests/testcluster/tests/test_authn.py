"""Authentication without a server: token files, and who a request acts as after impersonation."""

from __future__ import annotations

from pathlib import Path

import pytest

from testcluster import authn, rbac
from testcluster.errors import ApiError

ALICE = rbac.UserInfo('alice', ('system:authenticated',))


def no_objects(plural: str, namespace: str, name: str) -> None:
    return None


def test_a_token_file_names_people_with_their_groups(tmp_path: Path) -> None:
    tokens = authn.Tokens()
    path = tmp_path / 'tokens.csv'
    path.write_text('# people\nt-alice,alice,u1,"team-a,devs"\nt-bob,bob,u2\n')
    tokens.load_token_file(path)
    assert tokens.authenticate('Bearer t-alice', no_objects) == rbac.UserInfo(
        'alice', ('team-a', 'devs', 'system:authenticated'), 'u1')
    assert tokens.authenticate('Bearer t-bob', no_objects).groups == ('system:authenticated',)
    assert tokens.authenticate('', no_objects) == authn.ANONYMOUS
    with pytest.raises(ApiError) as refused:
        tokens.authenticate('Bearer t-carol', no_objects)
    assert refused.value.code == 401
    path.write_text('t-x,x\n')
    with pytest.raises(ValueError, match='tokens.csv:1: expected token,user,uid'):
        tokens.load_token_file(path)


def test_impersonating_a_service_account_gives_its_groups_when_none_are_asked() -> None:
    allowed: list[rbac.Attributes] = []

    def allow(attrs: rbac.Attributes) -> rbac.Decision:
        allowed.append(attrs)
        return rbac.Decision(True)

    headers = {'Impersonate-User': 'system:serviceaccount:team-a:robot'}
    user = authn.impersonate(ALICE, headers, lambda key: [headers[key]] if key in headers else [], allow)
    assert user.groups == ('system:serviceaccounts', 'system:serviceaccounts:team-a', 'system:authenticated')
    assert [(a.verb, a.resource, a.namespace, a.name) for a in allowed] == [
        ('impersonate', 'serviceaccounts', 'team-a', 'robot')]


def test_without_impersonation_headers_the_requester_acts_as_itself() -> None:
    def refuse(attrs: rbac.Attributes) -> rbac.Decision:
        raise AssertionError('nothing to authorize')

    assert authn.impersonate(ALICE, {}, lambda key: [], refuse) is ALICE
