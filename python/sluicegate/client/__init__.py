"""sluicegate's client: the official `openai` and `anthropic` clients with the rules that keep a
tenant from hurting itself and the fleet.

    from sluicegate.client import OpenAI          # instead of: from openai import OpenAI
    client = OpenAI(base_url="http://gateway:8080/v1", api_key="sk-sg-...")

Importing this package loads neither SDK (nor the control plane); `OpenAI`/`AsyncOpenAI` load
`openai` and `Anthropic`/`AsyncAnthropic` load `anthropic` when first used."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sluicegate.client.errors import ClientError, ConcurrencyLimitExceeded
from sluicegate.client.governor import Governor, default_governor, stats
from sluicegate.client.measure import CallRecord
from sluicegate.client.policy import Policy

if TYPE_CHECKING:
    from sluicegate.client.anthropic_client import Anthropic, AsyncAnthropic
    from sluicegate.client.openai_client import AsyncOpenAI, OpenAI

_LAZY = {
    "OpenAI": "sluicegate.client.openai_client",
    "AsyncOpenAI": "sluicegate.client.openai_client",
    "Anthropic": "sluicegate.client.anthropic_client",
    "AsyncAnthropic": "sluicegate.client.anthropic_client",
}

__all__ = [
    "Anthropic",
    "AsyncAnthropic",
    "AsyncOpenAI",
    "CallRecord",
    "ClientError",
    "ConcurrencyLimitExceeded",
    "Governor",
    "OpenAI",
    "Policy",
    "default_governor",
    "stats",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
