"""The console's screenshots are in `docs/console/`, one per page, and the README shows them."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGES = (
    "sign-in",
    "overview",
    "overview-drill",
    "keys",
    "key-created",
    "key-detail",
    "tenants",
    "tenant",
    "upstreams",
    "pool",
    "drills",
    "drill-live",
    "audit",
    "keys-tenant",
    "overview-phone",
    "key-detail-phone",
    "overview-dark",
)


def test_every_page_has_a_screenshot_shown_in_the_readme() -> None:
    readme = (ROOT / "README.md").read_text()
    linked = set(re.findall(r"docs/console/([a-z-]+)\.png", readme))
    shots = {p.stem for p in (ROOT / "docs" / "console").glob("*.png")}
    assert set(PAGES) <= shots
    assert shots == linked
    for name in shots:
        assert (ROOT / "docs" / "console" / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
