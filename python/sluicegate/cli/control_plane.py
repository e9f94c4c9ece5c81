"""The control plane (`control`) the CLI is about to import, checked to be sluicegate's.

`control` is a top-level import name that an unrelated PyPI distribution ships too: installed
beside sluicegate, it shadows or overwrites ours, and `serve` would fail deep in an import (or run
someone else's code). Every command that needs the control plane calls `check()` first and stops
with one clear line instead."""

from __future__ import annotations

import importlib.metadata
import importlib.util
from pathlib import Path

REINSTALL = "pip install --force-reinstall sluicegate"


class ForeignControlPlane(Exception):
    """The `control` package found is missing, not sluicegate's, or shared with another
    distribution; the message says which and what to do."""


def _claimants() -> list[str]:
    """Distributions other than sluicegate whose files include a top-level `control`."""
    owners = importlib.metadata.packages_distributions().get("control", [])
    return sorted({name for name in owners if name.lower() != "sluicegate"})


def check() -> None:
    spec = importlib.util.find_spec("control")
    if spec is None or spec.origin is None:
        raise ForeignControlPlane(
            "the control plane (the package `control`) is not installed: this installation of "
            f"sluicegate is incomplete (built with maturin older than 1.12?); run `{REINSTALL}`"
        )
    where = Path(spec.origin).parent
    others = _claimants()
    if others:
        raise ForeignControlPlane(
            f"the package `control` at {where} is also installed by {', '.join(others)}, which "
            f"is not sluicegate's control plane; uninstall it (`pip uninstall {others[0]}`), "
            f"then run `{REINSTALL}`"
        )
    import control

    if getattr(control, "OWNER", None) != "sluicegate" or not (where / "process").is_dir():
        raise ForeignControlPlane(
            f"the package `control` at {where} is not sluicegate's control plane (another "
            "distribution of that name?); remove it from the Python path or uninstall it, "
            f"then run `{REINSTALL}`"
        )
