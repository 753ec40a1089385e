"""Execution-time authorization: SubjectAccessReviews for the identities behind a turn.

Authorization is never frozen into the snapshot: every segment asks the API server
again, for every identity that contributed to the turn (``spec.submittedBy`` of the
run's inputs and of its Resume inputs). A resource is usable only when *all* of them
may use it: the turn acts on behalf of each of them.

The mapping (all in API group ``sessionops.dev``, in the run's namespace), so cluster
admins grant these with ordinary RBAC rules:

=================  ======  ==============  ====================================
what               verb    resource        name
=================  ======  ==============  ====================================
the Agent          get     agents          snapshot ``source.agentName``
a built-in tool    use     tools           tool name (``run_shell``, ...)
an MCP tool        use     mcpservers      server name (tool ``<server>__<tool>``)
a skill            use     skills          skill (ConfigMap) name
=================  ======  ==============  ====================================

Example Role rule granting everything but ``run_shell``::

    - apiGroups: [sessionops.dev]
      resources: [tools]
      verbs: [use]
      resourceNames: [read_file, write_file, list_files, ask_user, load_skill]

Denied Agent access fails the turn before any model call (``AccessRevoked``); denied
tools are hidden from the model and refused at the call boundary (the agent package's
``ToolAccessMiddleware`` asks ``tool_filter`` at each call); denied skills are not
offered.

Cost: Kubernetes has no batch SubjectAccessReview (one review answers one identity and
one check), so a segment needs one review per (identity, check). It asks each once: the
checks a segment can name from its snapshot are reviewed together before the first model
call, concurrently, and every answer is reused for ``ttl`` seconds (a model call asks for
all its tools again, a tool call for its own). A revocation is therefore seen within
``ttl``: 30 s, the API server's own default for reusing a webhook authorizer's denial
(``--authorization-webhook-cache-unauthorized-ttl``; an allowance is reused for 5 min),
while a turn's model calls, seconds apart, reuse the answers instead of asking again.
When answers go stale, those a call needs are asked for again together.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from sessionops import GROUP
from sessionops.api.input import SubmittedBy
from sessionops.api.snapshot import BUILTIN_TOOLS, ContextSnapshot
from sessionops.platform.worker_kube import WorkerKube
from sessionops.policy import authz
from sessionops.views import InputView

MCP_SEPARATOR = "__"
CACHE_SECONDS = 30.0
"""How long a review's answer is reused within a segment (seconds): the bound on how late a
revocation is seen by a running segment."""
CONCURRENT_REVIEWS = 4
"""Reviews in flight at once (``WorkerKube.connect``'s pool keeps connections for them and
for the Lease and transcript writers beside them)."""


@dataclasses.dataclass(frozen=True)
class Check:
    verb: str
    resource: str
    name: str

    def describe(self) -> str:
        return f"{self.verb} {self.resource}.{GROUP} {self.name!r}"


def agent_check(agent: str) -> Check:
    return Check("get", "agents", agent)


def mcp_server_check(server: str) -> Check:
    return Check("use", "mcpservers", server)


def tool_check(tool: str) -> Check:
    if MCP_SEPARATOR in tool:
        return mcp_server_check(tool.split(MCP_SEPARATOR, 1)[0])
    return Check("use", "tools", tool)


def skill_check(skill: str) -> Check:
    return Check("use", "skills", skill)


def up_front_checks(snapshot: ContextSnapshot) -> list[Check]:
    """The checks a segment of this snapshot needs before its first model call that the snapshot
    names: its Agent, its built-in tools, its MCP servers and the skills it selects by name (with
    ``skills: all`` the skills are known only once listed)."""
    tools = BUILTIN_TOOLS if snapshot.tools == "all" else snapshot.tools
    skills = () if snapshot.skills == "all" else snapshot.skills
    return [*([agent_check(snapshot.source.agent_name)] if snapshot.source and snapshot.source.agent_name else []),
            *map(tool_check, tools), *(mcp_server_check(s.name) for s in snapshot.mcp_servers),
            *map(skill_check, dict.fromkeys([*skills, *snapshot.preload_skills]))]


def review_spec(subject: SubmittedBy, namespace: str, check: Check) -> dict[str, Any]:
    """The SubjectAccessReview spec for one identity and one check (pure)."""
    return authz.review_spec(subject, namespace, check.verb, check.resource, check.name)


def subjects_of(inputs: Iterable[Mapping[str, Any]]) -> list[SubmittedBy | None]:
    """The distinct submitters of these inputs; None for an input admission did not stamp."""
    seen: dict[str, SubmittedBy | None] = {}
    for inp in inputs:
        raw = InputView(inp).submitted_by
        subject = SubmittedBy.model_validate(raw) if raw else None
        key = subject.model_dump_json() if subject else ""
        seen.setdefault(key, subject)
    return list(seen.values())


class Access:
    """Answers "may the turn's identities do this now?" with cached SubjectAccessReviews.

    Shared by the graph's parallel tool calls (threads): a lock makes concurrent askers share
    one round of reviews, so no check is reviewed twice at once.
    """

    def __init__(self, kube: WorkerKube, namespace: str, subjects: Iterable[SubmittedBy | None], *,
                 ttl: float = CACHE_SECONDS, clock: Callable[[], float] = time.monotonic) -> None:
        self.kube = kube
        self.namespace = namespace
        self.subjects = list(subjects)
        self.ttl = ttl
        self.clock = clock
        self._cache: dict[Check, tuple[float, bool, str]] = {}
        self._lock = threading.Lock()

    def answers(self, checks: Iterable[Check]) -> dict[Check, tuple[bool, str]]:
        """(allowed, why not) per check; the missing or stale ones are reviewed together.
        Exceptions propagate: an unanswered review never grants."""
        wanted = list(dict.fromkeys(checks))
        with self._lock:
            now = self.clock()
            stale = [c for c in wanted if (c not in self._cache) or now - self._cache[c][0] >= self.ttl]
            if stale:
                # Aged from before the question: an answer is never reused longer than ttl.
                for check, (allowed, why) in zip(stale, self._review(stale), strict=True):
                    self._cache[check] = (now, allowed, why)
            return {c: self._cache[c][1:] for c in wanted}

    def review(self, check: Check) -> tuple[bool, str]:
        """(allowed, why not) of one check."""
        return self.answers([check])[check]

    def _review(self, checks: Sequence[Check]) -> list[tuple[bool, str]]:
        if not self.subjects:
            return [(False, "the turn has no inputs to authorize")] * len(checks)
        if None in self.subjects:
            return [(False, "an input of the turn has no spec.submittedBy (it was not admitted)")] * len(checks)
        subjects = [s for s in self.subjects if s is not None]
        pairs = [(subject, check) for check in checks for subject in subjects]

        def ask(pair: tuple[SubmittedBy, Check]) -> tuple[bool, str]:
            return self.kube.access_review(review_spec(pair[0], self.namespace, pair[1]))

        if len(pairs) == 1:
            replies = iter([ask(pairs[0])])
        else:
            with ThreadPoolExecutor(min(CONCURRENT_REVIEWS, len(pairs)), thread_name_prefix="review") as pool:
                replies = iter(list(pool.map(ask, pairs)))
        answers: list[tuple[bool, str]] = []
        for check in checks:
            mine = [(subject, next(replies)) for subject in subjects]
            denied = [(subject, reason) for subject, (allowed, reason) in mine if not allowed]
            if not denied:
                answers.append((True, ""))
                continue
            subject, reason = denied[0]
            answers.append((False, f"{subject.username} may not {check.describe()}" + (f": {reason}" if reason else "")))
        return answers

    def allowed(self, check: Check) -> bool:
        return self.review(check)[0]

    def tool_filter(self, tools: Sequence[str]) -> set[str]:
        """The agent package's ``ToolFilter``: the allowed names among a model call's tools, or a tool call's one."""
        answers = self.answers(tool_check(t) for t in tools)
        return {t for t in tools if answers[tool_check(t)][0]}

    def visible_skills(self, skills: Mapping[str, str]) -> dict[str, str]:
        answers = self.answers(skill_check(name) for name in skills)
        return {name: text for name, text in skills.items() if answers[skill_check(name)][0]}
