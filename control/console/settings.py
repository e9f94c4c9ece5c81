"""The console's `[console]` settings: whether it is served, and how long its sessions live.
Each option is documented in `control/sluicegate.example.toml`."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class ConsoleSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # Serve the browser console at /console on the admin port.
    enabled: bool = True
    # A session ends after this long without a request, and this long after its sign-in
    # whatever its use (the token's own expiry and revocation end it sooner).
    idle_seconds: int = Field(default=1800, ge=60, le=7 * 86400)
    max_age_seconds: int = Field(default=12 * 3600, ge=60, le=30 * 86400)
    # Sessions held at once, in all and per admin token (the oldest goes first past them).
    max_sessions: int = Field(default=10_000, ge=1, le=1_000_000)
    max_sessions_per_token: int = Field(default=20, ge=1, le=10_000)
    # The cookie's `Secure` flag: `auto` sets it when the request came over https (behind a
    # TLS-terminating proxy that says so in the scheme it forwards, or `always`).
    secure_cookie: Literal["auto", "always", "never"] = "auto"
    # Seconds between refreshes of the overview and of a drill's live traffic.
    refresh_seconds: int = Field(default=3, ge=1, le=300)
