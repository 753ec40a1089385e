"""Agent admission names the field for what the CRD schema cannot express."""

from __future__ import annotations

import pytest

from sessionops.admission.agents import check_agent
from sessionops.admission.errors import Rejection


def test_a_complete_agent_is_accepted() -> None:
    check_agent({"systemPrompt": "p", "tools": ["read_file"], "skills": ["a"], "preloadSkills": ["a"],
                 "contextSchema": [{"name": "team", "type": "string", "enum": ["x"], "default": "x"}]})
    check_agent({"systemPrompt": "p", "tools": "all", "skills": "all", "preloadSkills": ["z"]})


@pytest.mark.parametrize(("spec", "field"), [
    ({"systemPrompt": "p", "tools": "some"}, "spec.tools"),
    ({"systemPrompt": "p", "tools": ["rm_rf"]}, "spec.tools"),
    ({"systemPrompt": "p", "skills": 3}, "spec.skills"),
    ({"systemPrompt": "p", "skills": ["a"], "preloadSkills": ["b"]}, "spec.preloadSkills"),
    ({"systemPrompt": "p", "contextSchema": [{"name": "n", "type": "integer", "default": "1"}]},
     "spec.contextSchema[0]"),
    ({"systemPrompt": "p", "contextSchema": [{"name": "n", "type": "string", "enum": ["a"], "default": "b"}]},
     "spec.contextSchema[0].default"),
    ({"systemPrompt": "p", "contextSchema": [{"name": "n", "type": "string"}, {"name": "n", "type": "string"}]},
     "spec.contextSchema"),
    ({"systemPrompt": ""}, "spec.systemPrompt"),
], ids=["tools neither all nor list", "unknown tool", "skills of wrong type", "preload outside skills",
        "default of wrong type", "default outside enum", "duplicate context field", "empty prompt"])
def test_invalid_agents_are_rejected_with_the_field(spec: dict, field: str) -> None:
    with pytest.raises(Rejection) as e:
        check_agent(spec)
    assert e.value.field.startswith(field), e.value
