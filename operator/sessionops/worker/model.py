"""The turn's chat model, from the catalog entry the operator put into the Job's env.

Both providers speak OpenAI chat completions (``replay`` is the deterministic replay
server), so both go through langchain-openai. ``max_retries=0``: the agent's
``ModelRetryMiddleware`` retries (``modelRetries`` of the snapshot), and two retry
layers would multiply.
"""

from __future__ import annotations

from typing import Any

# Its module, not ``langchain_openai`` (also the Azure, embeddings and completion models; see
# ``startup``).
from langchain_openai.chat_models.base import ChatOpenAI

from sessionops.worker.env import ModelEnv

PROVIDERS = ("openai", "replay")
REQUEST_TIMEOUT_SECONDS = 300.0
"""Per model request: a hung provider becomes a model error the middleware retries."""


class ModelUnavailable(ValueError):
    """The catalog entry cannot be used (unknown provider, replay without endpoint)."""


def chat_model(entry: ModelEnv) -> ChatOpenAI:
    if entry.provider not in PROVIDERS:
        raise ModelUnavailable(f"model {entry.name!r}: provider {entry.provider!r} is not one of {PROVIDERS}")
    if entry.provider == "replay" and not entry.endpoint:
        raise ModelUnavailable(f"model {entry.name!r}: a replay model needs an endpoint")
    kwargs: dict[str, Any] = {}
    if entry.max_tokens is not None:
        kwargs["max_tokens"] = entry.max_tokens
    if entry.temperature is not None:
        kwargs["temperature"] = entry.temperature
    return ChatOpenAI(
        model=entry.model_id,
        base_url=entry.endpoint,
        # The client insists on a key; the replay server (and some gateways) need none.
        api_key=entry.api_key or "unused",
        max_retries=0,
        stream_usage=True,
        timeout=REQUEST_TIMEOUT_SECONDS,
        **kwargs,
    )
