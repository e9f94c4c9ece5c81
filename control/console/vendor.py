"""`make console-vendor`: fetch the console's vendored front-end libraries (htmx, uPlot) from the
npm registry at the versions in `static/vendor/SOURCES.json`, check each tarball against its
recorded integrity, and write the files the console serves with their new checksums. The
files are committed, so neither a build nor a run needs npm or Node.js."""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

VENDOR = Path(__file__).parent / "static" / "vendor"
SOURCES = VENDOR / "SOURCES.json"


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def integrity(path: Path) -> str:
    return "sha512-" + base64.b64encode(hashlib.sha512(path.read_bytes()).digest()).decode()


def refresh() -> None:
    sources = json.loads(SOURCES.read_text())
    with tempfile.TemporaryDirectory() as tmp:
        for package, spec in sources.items():
            name = (
                subprocess.run(
                    ["npm", "pack", f"{package}@{spec['version']}", "--silent"],
                    cwd=tmp,
                    check=True,
                    capture_output=True,
                    text=True,
                )
                .stdout.strip()
                .splitlines()[-1]
            )
            tarball = Path(tmp) / name
            if integrity(tarball) != spec["integrity"]:
                raise SystemExit(f"{package}: the tarball does not match its recorded integrity")
            with tarfile.open(tarball) as archive:
                for target, entry in spec["files"].items():
                    member = archive.extractfile(f"package/{entry['from']}")
                    if member is None:
                        raise SystemExit(f"{package}: no {entry['from']} in the tarball")
                    (VENDOR / target).write_bytes(member.read())
                    entry["sha256"] = sha256(VENDOR / target)
    SOURCES.write_text(json.dumps(sources, indent=2) + "\n")


if __name__ == "__main__":
    refresh()
    sys.exit(0)
