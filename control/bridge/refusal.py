"""The core's refusal of a snapshot, in one place: what its `ConfigError` says (`refusal_of`), and
the same told in the API's words: the path (`pools[1].timeouts.total_ms`) located through the
snapshot's index (pool `big`, field `timeouts.total_ms`)."""

from __future__ import annotations

from dataclasses import dataclass

from sluicegate._core import ConfigError

from control.bridge.snapshot import SnapshotIndex


@dataclass(frozen=True)
class Refusal:
    """The core's NACK as its arguments say it: the whole message and, for a field at fault,
    its path in the payload (`pools[0].timeouts.total_ms`) and what is wrong with it."""

    message: str
    path: str | None = None
    detail: str | None = None


def refusal_of(error: ConfigError) -> Refusal:
    """`ConfigError.args` is `(message, path, detail)`; `StaleConfigError` carries `(message,)`."""
    args = error.args
    message = str(args[0]) if args else type(error).__name__
    if len(args) == 3 and isinstance(args[1], str) and isinstance(args[2], str):
        return Refusal(message, args[1], args[2])
    return Refusal(message)


@dataclass(frozen=True)
class Fault:
    """Where the core's refusal points: a resource, and the field inside it."""

    resource_type: str
    resource_id: str
    field: str
    message: str
    # For pool members: the provider the member stands for.
    provider_id: str | None = None


_RESOURCE = {
    "tenants": "tenant",
    "keys": "key",
    "upsert": "key",
    "pools": "pool",
    "routes": "route",
}
# Payload fields that the API spells differently: a tenant's or key's `limits.rpm` is `rpm`.
_FLATTENED = {"tenant": "limits.", "key": "limits."}


def path_steps(path: str) -> list[str | int] | None:
    """`pools[1].members[0].weight` -> `["pools", 1, "members", 0, "weight"]`; None if the path
    is not made of names and indexes."""
    steps: list[str | int] = []
    for part in path.split("."):
        name, *indexes = part.split("[")
        if name:
            steps.append(name)
        elif not indexes:
            return None
        for index in indexes:
            if not index.endswith("]") or not index[:-1].isdigit():
                return None
            steps.append(int(index[:-1]))
    return steps


def render_path(steps: list[str | int]) -> str:
    out = ""
    for step in steps:
        if isinstance(step, int):
            out += f"[{step}]"
        else:
            out += f".{step}" if out else step
    return out


def locate_fault(path: str | None, detail: str, index: SnapshotIndex) -> Fault | None:
    """The resource and request field a core refusal points at, or None if its path names no
    list entry of the snapshot."""
    steps = None if path is None else path_steps(path)
    if not steps or len(steps) < 2 or steps[0] not in _RESOURCE or not isinstance(steps[1], int):
        return None
    kind, i = str(steps[0]), steps[1]
    # Key changes name their keys `upsert[i]`.
    entries: list[str] = getattr(index, "keys" if kind == "upsert" else kind)
    if i >= len(entries):
        return None
    resource_type = _RESOURCE[kind]
    field_name = render_path(steps[2:]).removeprefix(_FLATTENED.get(resource_type, ""))
    provider_id = None
    if kind == "pools" and len(steps) > 3 and steps[2] == "members" and isinstance(steps[3], int):
        provider_id = index.members.get((i, steps[3]))
    return Fault(resource_type, entries[i], field_name or "body", detail, provider_id)
