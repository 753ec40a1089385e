"""The pydantic models enforce bounds before anything reaches the API server."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from sessionops.api.config import OperatorConfig
from sessionops.api.input import MAX_MESSAGE_CHARS, AgentInputSpec
from tests import factories


def test_message_count_and_length_are_bounded() -> None:
    ok = {"sessionRef": {"name": "s1"}, "messages": [{"content": "x" * MAX_MESSAGE_CHARS}] * 20}
    AgentInputSpec.model_validate(ok)
    with pytest.raises(ValidationError, match="messages"):
        AgentInputSpec.model_validate({**ok, "messages": [{"content": "x"}] * 21})
    with pytest.raises(ValidationError, match="content"):
        AgentInputSpec.model_validate({**ok, "messages": [{"content": "x" * (MAX_MESSAGE_CHARS + 1)}]})


def test_config_default_model_must_be_in_the_catalog() -> None:
    with pytest.raises(ValidationError, match="defaults.model"):
        OperatorConfig.model_validate({"defaults": {"model": "gpt"}, "models": [
            {"name": "replay/hello", "provider": "replay", "model": "hello"}]})


def test_config_version_changes_with_content() -> None:
    a, b = factories.config(), factories.config(default_model="replay/steer")
    assert a.version == factories.config().version
    assert a.version != b.version


def test_sizes_are_counted_as_the_api_server_stores_them() -> None:
    """Go's JSON encoder: UTF-8, ``<``, ``>``, ``&`` and U+2028/U+2029 as six-byte escapes."""
    from sessionops.api import limits

    assert limits.json_size("<é\u2028") == len('"\\u003cé\\u2028"'.encode()) == 16
    assert limits.json_size({"a": [1, "x"]}) == len('{"a":[1,"x"]}')
    assert limits.text_size(["ab", "\n"]) == 4  # characters only, a newline escaped as two
