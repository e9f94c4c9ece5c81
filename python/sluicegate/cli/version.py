"""`sluicegate --version`: the package's version and how its core was built."""

from __future__ import annotations

import importlib.metadata

from sluicegate import _core


def version_text() -> str:
    """`sluicegate 0.1.0 (core 0.1.0, release build, rustc 1.95.0 (...), x86_64-...)`: the core's
    own version is shown too, so an extension left over from another build is seen at once."""
    try:
        package = importlib.metadata.version("sluicegate")
    except importlib.metadata.PackageNotFoundError:
        package = _core.__version__
    return f"sluicegate {package} (core {_core.__version__}, {_core.__build__})"
