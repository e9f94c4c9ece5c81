"""Reading JSON-lines files that another process is still appending to."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def whole_lines(path: Path) -> list[dict[str, Any]]:
    """The records the file holds so far, one per line that ends in a newline.

    A reader racing an append can see its line half copied: the kernel extends a file's size a
    page at a time while it copies a write, so a line that straddles a page boundary shows its
    first part before its newline. The unterminated tail is that line still being written; it is
    left for the next read. A missing file holds nothing yet."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return []
    whole, _, _ = text.rpartition("\n")
    return [json.loads(line) for line in whole.split("\n") if line.strip()]
