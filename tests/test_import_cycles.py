"""No import cycles: a module that needs another's names imports it, and the other never needs
it back (a cycle works only by the order of imports, and breaks when that order changes)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.imports import cycles, import_graph

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    ("root", "package"),
    [
        (ROOT / "bench", "bench"),
        (ROOT / "python" / "sluicegate", "sluicegate"),
        (ROOT / "control", "control"),
    ],
)
def test_no_import_cycles(root: Path, package: str) -> None:
    graph = import_graph(root, package)
    assert len(graph) > 5, graph  # the package was read
    assert cycles(graph) == []


def test_a_cycle_is_found_even_through_an_import_inside_a_function(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("from pkg.sub import c\n")
    (package / "a.py").write_text("from pkg import b\n")
    (package / "b.py").write_text("def f():\n    from .sub.c import g\n")
    (package / "sub" / "c.py").write_text("import pkg.a\n\ndef g(): ...\n")
    (package / "d.py").write_text("from pkg.a import x\n")  # into the cycle, not part of it
    graph = import_graph(package, "pkg")
    assert graph["pkg.sub"] == {"pkg.sub.c"}
    assert graph["pkg.sub.c"] == {"pkg.a"}
    assert cycles(graph) == [["pkg.a", "pkg.b", "pkg.sub.c"]]
