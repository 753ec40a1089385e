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
offered. Answers are cached for ``ttl`` seconds, so a revocation is seen within it.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from sessionops import GROUP
from sessionops.api.input import SubmittedBy
from sessionops.platform.worker_kube import WorkerKube
from sessionops.policy import authz
from sessionops.views import InputView

MCP_SEPARATOR = "__"
CACHE_SECONDS = 5.0
"""How long a review's answer is reused within a segment (seconds)."""


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
    """Answers "may the turn's identities do this now?" with cached SubjectAccessReviews."""

    def __init__(self, kube: WorkerKube, namespace: str, subjects: Iterable[SubmittedBy | None], *,
                 ttl: float = CACHE_SECONDS, clock: Callable[[], float] = time.monotonic) -> None:
        self.kube = kube
        self.namespace = namespace
        self.subjects = list(subjects)
        self.ttl = ttl
        self.clock = clock
        self._cache: dict[Check, tuple[float, bool, str]] = {}

    def review(self, check: Check) -> tuple[bool, str]:
        """(allowed, why not). Exceptions propagate: an unanswered review never grants."""
        cached = self._cache.get(check)
        if cached is not None and self.clock() - cached[0] < self.ttl:
            return cached[1], cached[2]
        allowed, why = self._review(check)
        self._cache[check] = (self.clock(), allowed, why)
        return allowed, why

    def _review(self, check: Check) -> tuple[bool, str]:
        if not self.subjects:
            return False, "the turn has no inputs to authorize"
        for subject in self.subjects:
            if subject is None:
                return False, "an input of the turn has no spec.submittedBy (it was not admitted)"
            allowed, reason = self.kube.access_review(review_spec(subject, self.namespace, check))
            if not allowed:
                return False, f"{subject.username} may not {check.describe()}" + (f": {reason}" if reason else "")
        return True, ""

    def allowed(self, check: Check) -> bool:
        return self.review(check)[0]

    def tool_filter(self, tool: str) -> bool:
        """The agent package's ``ToolFilter``: called per tool name at each model and tool call."""
        return self.allowed(tool_check(tool))

    def visible_skills(self, skills: Mapping[str, str]) -> dict[str, str]:
        return {name: text for name, text in skills.items() if self.allowed(skill_check(name))}
