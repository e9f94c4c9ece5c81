"""sluicegate: a multi-tenant LLM API gateway with a Rust data plane."""

from sluicegate._core import __version__

__all__ = ["__version__"]
