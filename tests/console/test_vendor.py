"""The console's vendored libraries are the files `SOURCES.json` records (a change to them is a
deliberate `make console-vendor`), and they are what the pages load, from the package itself."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from control.console.render import TEMPLATES
from control.console.vendor import SOURCES, VENDOR


def test_vendored_files_match_their_recorded_checksums() -> None:
    sources = json.loads(SOURCES.read_text())
    assert set(sources) == {"htmx.org", "uplot"}
    recorded = set()
    for spec in sources.values():
        assert spec["integrity"].startswith("sha512-")
        for name, entry in spec["files"].items():
            recorded.add(name)
            digest = hashlib.sha256((VENDOR / name).read_bytes()).hexdigest()
            assert digest == entry["sha256"], name
    on_disk = {p.name for p in VENDOR.iterdir()} - {"SOURCES.json"}
    assert on_disk == recorded


def test_pages_load_only_the_packages_own_files() -> None:
    base = (Path(TEMPLATES) / "base.html").read_text()
    sources = re.findall(r'<(?:script src|link rel="[a-z]+" href)="([^"]+)"', base)
    assert sources, base
    for url in sources:
        assert url.startswith("/console") or url == "data:,", url
