"""The provider kinds and the API each speaks on the wire (a pool's members speak one). Plain
constants, so that the CLI can offer the kinds without loading SQLAlchemy."""

from __future__ import annotations

PROVIDER_KINDS = ("openai", "anthropic", "azure_openai")
API_OF_KIND = {"openai": "openai", "azure_openai": "openai", "anthropic": "anthropic"}
