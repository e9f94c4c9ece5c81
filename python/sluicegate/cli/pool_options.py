"""The `--*` options of a pool's timeouts and policies, derived from the admin API's pydantic
models (`control/pools/`), with the core's defaults in their help: a field added there is an
option here, under the same name."""

from __future__ import annotations

import argparse
import types
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Annotated, Any, Union

from pydantic import BaseModel

from control.pools.defaults import CORE_DEFAULTS
from control.pools.policies import Admission, Ejection, HealthCheck, Retry
from control.pools.schemas import Timeouts
from sluicegate.cli.client import CliError
from sluicegate.cli.options import UNSET, optional_int, word_list

# Each part of a pool's settings: its field in the request, its model, its options' prefix.
SECTIONS: tuple[tuple[str, type[BaseModel], str], ...] = (
    ("timeouts", Timeouts, ""),
    ("admission", Admission, ""),
    ("retry", Retry, "retry-"),
    ("ejection", Ejection, "ejection-"),
    ("health_check", HealthCheck, "health-check-"),
)
TITLES = {"health_check": "health checks (any of these options turns them on)"}
# Option names shorter than the field path they come from.
RENAMED = {"ejection-max-ejected-percent": "ejection-max-percent"}


@dataclass(frozen=True)
class PoolOption:
    name: str  # without the leading --
    path: tuple[str, ...]  # where the value goes in the request body
    kind: Callable[[str], Any]
    help: str

    @property
    def dest(self) -> str:
        return self.name.replace("-", "_")

    @property
    def metavar(self) -> str:
        if self.name.endswith("-ms"):
            return "MS"
        return {float: "X", word_list: "A,B", str: "PATH"}.get(self.kind, "N")


def _kind(annotation: Any) -> tuple[Any, bool]:
    """The type under Optional and Annotated, and whether None is allowed."""
    optional = False
    if typing.get_origin(annotation) in (Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        optional, annotation = len(args) < len(typing.get_args(annotation)), args[0]
    if typing.get_origin(annotation) is Annotated:
        annotation = typing.get_args(annotation)[0]
    return annotation, optional


def _parser_of(annotation: Any, optional: bool) -> Callable[[str], Any]:
    if typing.get_origin(annotation) is list:
        return word_list
    if annotation is int:
        return optional_int if optional else int
    if annotation in (float, str):
        return typing.cast(Callable[[str], Any], annotation)
    raise TypeError(f"no command-line option for a field of type {annotation!r}")


def _walk(
    model: type[BaseModel], path: tuple[str, ...], defaults: dict[str, Any]
) -> Iterator[tuple[tuple[str, ...], Any, bool, str | None, Any]]:
    for name, field in model.model_fields.items():
        annotation, optional = _kind(field.annotation)
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            yield from _walk(annotation, (*path, name), defaults[name])
        else:
            yield (*path, name), annotation, optional, field.description, defaults[name]


def _default_text(value: Any) -> str:
    if value is None:
        return "none"
    return ",".join(value) if isinstance(value, list) else str(value)


def pool_options() -> list[PoolOption]:
    options = []
    for section, model, prefix in SECTIONS:
        for path, annotation, optional, described, default in _walk(
            model, (), CORE_DEFAULTS[section]
        ):
            joined = "-".join(path).replace("_", "-")
            # `retry.retry_on` is --retry-on: a prefix the field's name has already is not doubled.
            name = joined if joined.startswith(prefix) else prefix + joined
            help_text = f"{described or ''} (default {_default_text(default)})".lstrip()
            if optional:
                help_text += "; 'none' unsets it"
            options.append(
                PoolOption(
                    RENAMED.get(name, name),
                    (section, *path),
                    _parser_of(annotation, optional),
                    help_text,
                )
            )
    return options


OPTIONS = pool_options()


def add_pool_options(p: argparse.ArgumentParser, update: bool) -> None:
    groups = {
        section: p.add_argument_group(TITLES.get(section, section.replace("_", " ")))
        for section, _, _ in SECTIONS
    }
    for option in OPTIONS:
        groups[option.path[0]].add_argument(
            f"--{option.name}",
            type=option.kind,
            default=UNSET,
            metavar=option.metavar,
            help=option.help,
        )
    if update:
        groups["health_check"].add_argument(
            "--no-health-check", action="store_true", help="turn health checks off"
        )


def pool_settings(body: dict[str, Any], args: argparse.Namespace) -> None:
    """The timeouts and policy options given, nested as the API takes them."""
    for option in OPTIONS:
        value = getattr(args, option.dest, UNSET)
        if value is UNSET:
            continue
        node = body
        for step in option.path[:-1]:
            node = node.setdefault(step, {})
        node[option.path[-1]] = value
    if getattr(args, "no_health_check", False):
        if "health_check" in body:
            raise CliError("--no-health-check cannot go with --health-check-* options", code=2)
        body["health_check"] = None
