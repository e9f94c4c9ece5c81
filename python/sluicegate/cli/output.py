"""Answers printed for a person (tables and aligned fields) or, with `--json`, as the API gave
them, for scripts."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

# A column of a list: its header and how a row's cell is read (a field name or a function).
Column = tuple[str, str | Callable[[Mapping[str, Any]], Any]]


def write(text: str) -> None:
    """Print to stdout; a reader that went away (`| head`) is not an error of the command."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def as_json(answer: Any) -> str:
    return json.dumps(answer, indent=2) + "\n"


def cell(value: Any) -> str:
    """One value as a table shows it: `-` for none, lists comma-separated."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list):
        return ",".join(cell(v) for v in value) if value else "-"
    if isinstance(value, dict):
        return ", ".join(f"{k} {cell(v)}" for k, v in value.items())
    return str(value)


def table(
    header: Sequence[str], rows: Iterable[Sequence[str]], indent: str = "", numeric: bool = False
) -> list[str]:
    """Columns two spaces apart; with `numeric`, every column but the first is right-aligned."""
    body = [list(header), *[list(r) for r in rows]]
    widths = [max(len(row[i]) for row in body) for i in range(len(header))]
    lines = []
    for row in body:
        cells = [
            c.rjust(widths[i]) if numeric and i > 0 else c.ljust(widths[i])
            for i, c in enumerate(row)
        ]
        lines.append(indent + "  ".join(cells).rstrip())
    return lines


def rows_of(items: Sequence[Mapping[str, Any]], columns: Sequence[Column]) -> list[list[str]]:
    def read(item: Mapping[str, Any], source: str | Callable[[Mapping[str, Any]], Any]) -> Any:
        return item.get(source) if isinstance(source, str) else source(item)

    return [[cell(read(item, source)) for _, source in columns] for item in items]


def render_page(page: Mapping[str, Any], columns: Sequence[Column]) -> str:
    """A page of a list (`items`, `next_cursor`) as a table, and how to get the next page."""
    items = page["items"]
    if not items:
        return "(none)\n"
    lines = table([h for h, _ in columns], rows_of(items, columns))
    if page.get("next_cursor"):
        lines.append(f"(more: --cursor {page['next_cursor']})")
    return "\n".join(lines) + "\n"


def _object_lines(obj: Mapping[str, Any], indent: str) -> list[str]:
    width = max((len(k) for k in obj), default=0)
    lines = []
    for name, value in obj.items():
        if isinstance(value, dict) and value:
            lines.append(f"{indent}{name}")
            lines += _object_lines(value, indent + "  ")
        elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            lines.append(f"{indent}{name}")
            header = list(dict.fromkeys(k for v in value for k in v))
            lines += table(header, rows_of(value, [(h, h) for h in header]), indent + "  ")
        else:
            lines.append(f"{indent}{name.ljust(width)}  {cell(value)}")
    return lines


def render_object(obj: Any) -> str:
    """An object as aligned `name  value` lines; nested objects and lists of objects indented
    under their name."""
    if not isinstance(obj, Mapping):
        return cell(obj) + "\n"
    return "\n".join(_object_lines(obj, "")) + "\n"


def render_secret(what: str, obj: Mapping[str, Any], field: str) -> str:
    """An object holding a secret created just now: the secret said once and plainly (it cannot
    be read again), then the rest of the object."""
    rest = {k: v for k, v in obj.items() if k != field}
    return (
        f"{what}: {obj[field]}\n"
        "  (shown this once: only its hash is stored; keep it now)\n\n" + render_object(rest)
    )
