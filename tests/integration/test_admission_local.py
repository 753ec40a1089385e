"""Admission under load, under fuzzing, and over raw HTTPS AdmissionReviews."""

from __future__ import annotations

import asyncio
import base64
import json
import re
import ssl
import uuid
from typing import Any

import aiohttp
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.e2e import manifests as m
from tests.stack import OPERATOR_NS, WEBHOOK_SERVICE

pytestmark = pytest.mark.asyncio(loop_scope="module")
API = "/apis/sessionops.dev/v1alpha1/namespaces/team-a"


async def request(cluster: Any, method: str, path: str, body: Any = None,
                  content_type: str = "application/json") -> tuple[int, dict]:
    async with aiohttp.ClientSession() as http, http.request(
            method, cluster.api_url + path, data=json.dumps(body) if body is not None else None,
            headers={"Content-Type": content_type, **cluster.admin_headers}, ssl=cluster.client_ssl()) as r:
        return r.status, await r.json()


async def test_parallel_receipts_serialize_with_model_updates(local: tuple) -> None:
    stack, cluster = local
    name = f"c{uuid.uuid4().hex[:6]}"
    await stack.apply(m.agent(name))
    await stack.apply(m.session(name, name, model="replay/hello"))
    update_points: list[tuple[int, int, str]] = []

    async def send(i: int) -> None:
        # Like client-go, retry a create that failed with a server error (a webhook timing out
        # on this loaded 2-core machine); a retried receipt may leave a gap, never a duplicate.
        for _ in range(3):
            status, body = await request(cluster, "POST", f"{API}/agentinputs",
                                         m.message(f"{name}-{i}", name, f"m{i}", delivery="FollowUp"))
            if status < 500:
                break
        assert status == 201, json.dumps(body)[:2000]

    async def update(model: str, delay: float) -> None:
        await asyncio.sleep(delay)
        for _ in range(50):  # a burst of receipts can win every race: retry on conflict, as client-go does
            status, body = await request(cluster, "PATCH", f"{API}/agentsessions/{name}",
                                         {"spec": {"model": model}}, "application/merge-patch+json")
            if status != 409:
                break
        assert status == 200, body
        update_points.append((int(body["metadata"]["resourceVersion"]), body["status"].get("lastSequence", 0),
                              model))

    await asyncio.gather(*(send(i) for i in range(50)), update("replay/steer", 0.05), update("replay/ask-user", 0.15))
    _, listing = await request(cluster, "GET", f"{API}/agentinputs?labelSelector=sessionops.dev%2Fsession%3D{name}")
    inputs = listing["items"]
    sequences = sorted(i["spec"]["sequence"] for i in inputs)
    assert len(inputs) == 50 and len(set(sequences)) == 50  # unique (gaps are tolerated)
    # The resourceVersion orders the two updates as the API server applied them; both may land
    # at the same lastSequence (no receipt between them), so that alone cannot order them.
    (_, first_at, first_model), (_, second_at, second_model) = sorted(update_points)
    assert first_at <= second_at
    for inp in inputs:
        seq, model = inp["spec"]["sequence"], inp["spec"]["contextSnapshot"]["model"]
        expected = "replay/hello" if seq <= first_at else first_model if seq <= second_at else second_model
        assert model == expected, (seq, model, update_points)


names = st.text(alphabet=st.characters(codec="utf-8"), min_size=1, max_size=80)
scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), names)
wrong = st.one_of(st.integers(), st.booleans(), st.lists(scalars, max_size=3),
                  st.dictionaries(names, scalars, max_size=3))


def bad_inputs(session: str) -> st.SearchStrategy[dict]:
    """Always malformed: a valid message input with exactly one thing broken."""
    def spec_with(**kv: Any) -> dict:
        body = m.message(f"f{uuid.uuid4().hex[:10]}", session, delivery="FollowUp")
        body["spec"].update(kv)
        return body

    return st.one_of(
        names.filter(lambda s: s.strip()).map(lambda s: spec_with(sessionRef={"name": "missing-" + s})),
        st.just(spec_with(sessionRef={})),
        st.just(spec_with(messages=[])),
        st.integers(21, 40).map(lambda n: spec_with(messages=[{"content": "x"}] * n)),
        st.integers(32_769, 40_000).map(lambda n: spec_with(messages=[{"content": "é" * n}])),
        wrong.map(lambda v: spec_with(messages=[{"content": v}])),
        wrong.map(lambda v: spec_with(messages=v)),
        names.filter(lambda s: s not in ("Message", "Resume", "Continue")).map(lambda v: spec_with(kind=v)),
        names.filter(lambda s: s not in ("Steer", "FollowUp")).map(lambda v: spec_with(delivery=v)),
        st.sampled_from(["", " ", "gpt-9", "replay/nope"]).map(lambda v: spec_with(overrides={"model": v})),
        st.just(spec_with(delivery="Steer", overrides={"approvalMode": "AlwaysTrust"})),
        names.filter(lambda s: s.isidentifier()).map(lambda k: spec_with(**{"unknown" + k: 1})),
        st.just(spec_with(kind="Resume", decisions=[])),
        st.just(spec_with(answers=["x"])),
        names.map(lambda s: {**spec_with(), "metadata": {"name": "Bad Name " + s}}),
    )


def bad_sessions(agent: str) -> st.SearchStrategy[dict]:
    def session_with(**kv: Any) -> dict:
        body = m.session(f"f{uuid.uuid4().hex[:10]}", agent)
        body["spec"].update(kv)
        return body

    return st.one_of(
        names.map(lambda s: session_with(agentRef={"name": "missing-" + s.encode().hex()[:40]})),
        st.just(session_with(agentRef={})),
        st.sampled_from(["", "   ", "gpt-9"]).map(lambda v: session_with(model=v)),
        wrong.map(lambda v: session_with(model=v)),
        names.filter(lambda s: s not in ("Default", "AlwaysTrust")).map(lambda v: session_with(approvalMode=v)),
        st.dictionaries(names.filter(lambda s: s != "team"), scalars, min_size=1, max_size=3).map(
            lambda c: session_with(context=c)),
        wrong.filter(lambda v: not isinstance(v, str)).map(lambda v: session_with(context={"team": v})),
        st.integers(41, 60).map(lambda n: {**session_with(), "metadata": {"name": "a" * n}}),
    )


def collect(strategy: st.SearchStrategy[dict], n: int) -> list[dict]:
    out: list[dict] = []

    @settings(max_examples=n, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(strategy)
    def gather(example: dict) -> None:
        out.append(example)

    gather()
    return out


async def test_fuzzed_malformed_objects_are_all_rejected_with_a_field(local: tuple) -> None:
    stack, cluster = local
    name = f"z{uuid.uuid4().hex[:6]}"
    await stack.apply(m.agent(name, contextSchema=[{"name": "team", "type": "string"}]))
    await stack.apply(m.session(name, name))
    cases = [("agentinputs", b) for b in collect(bad_inputs(name), 700)] + \
            [("agentsessions", b) for b in collect(bad_sessions(name), 400)]
    field = re.compile(r"\b(spec|metadata)[.\[:]|\bspec\b|unknown field|metadata\.name")
    for plural, body in cases:
        status, reply = await request(cluster, "POST", f"{API}/{plural}?fieldValidation=Strict", body)
        assert status in (400, 404, 409, 422), (status, body, reply)
        assert field.search(reply.get("message", "")), (body, reply)
    assert len(cases) >= 1000


def review(kind: str, plural: str, obj: dict, *, operation: str = "CREATE", dry_run: bool = False) -> dict:
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": str(uuid.uuid4()), "kind": {"group": "sessionops.dev", "version": "v1alpha1", "kind": kind},
        "resource": {"group": "sessionops.dev", "version": "v1alpha1", "resource": plural},
        "requestKind": {"group": "sessionops.dev", "version": "v1alpha1", "kind": kind},
        "requestResource": {"group": "sessionops.dev", "version": "v1alpha1", "resource": plural},
        "name": obj["metadata"]["name"], "namespace": "team-a", "operation": operation,
        "userInfo": {"username": "alice", "groups": ["dev"]}, "object": {**obj, "metadata": {
            **obj["metadata"], "namespace": "team-a"}}, "oldObject": None, "dryRun": dry_run, "options": {}}}


async def post_review(stack: Any, path: str, body: dict) -> dict:
    context = ssl.create_default_context(cafile=str(stack.root / "certs" / "ca.crt"))
    async with aiohttp.ClientSession() as http, http.post(
            f"https://127.0.0.1:{stack.webhook_port}{path}", json=body, ssl=context,
            server_hostname=f"{WEBHOOK_SERVICE}.{OPERATOR_NS}.svc") as r:
        assert r.status == 200
        return (await r.json())["response"]


async def test_admission_reviews_over_https(local: tuple) -> None:
    stack, _ = local
    name = f"r{uuid.uuid4().hex[:6]}"
    await stack.apply(m.agent(name))
    denied = await post_review(stack, "/sessionops-mutate",
                               review("AgentSession", "agentsessions", m.session(name, name, model="gpt-9")))
    assert denied["allowed"] is False and denied["status"]["code"] == 422
    assert 'spec.model: model "gpt-9" is not available' in denied["status"]["message"]
    await stack.apply(m.session(name, name))
    before = (await stack.get("asess", name))["status"].get("lastSequence", 0)
    dry = await post_review(stack, "/sessionops-mutate",
                            review("AgentInput", "agentinputs", m.message(f"{name}-1", name), dry_run=True))
    assert dry["allowed"] is True
    patch = json.loads(base64.b64decode(dry["patch"]))
    assert {"op": "add", "path": "/spec/submittedBy", "value": {"username": "alice", "groups": ["dev"]}} in patch
    assert (await stack.get("asess", name))["status"].get("lastSequence", 0) == before  # NoneOnDryRun


async def test_a_review_carrying_two_objects_of_the_api_servers_largest_size_is_read(local: tuple) -> None:
    """An UPDATE review carries object and oldObject, each up to the API server's 3 MiB request
    limit; aiohttp's default 1 MiB body limit answered 413, which the API server turns into a failure."""
    stack, _ = local
    body = review("AgentInput", "agentinputs", m.message("big", "s", "x" * (3 * 1024 * 1024 - 4096)),
                  operation="UPDATE")
    body["request"]["oldObject"] = body["request"]["object"]
    assert len(json.dumps(body)) > 6_000_000
    assert (await post_review(stack, "/sessionops-mutate", body))["allowed"] is True
