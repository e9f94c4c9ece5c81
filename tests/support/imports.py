"""The import graph of a package, read from its source with `ast` (imports inside functions
included: they run too, only later), and the cycles in it."""

from __future__ import annotations

import ast
from pathlib import Path


def module_names(root: Path, package: str) -> dict[str, Path]:
    """Dotted name -> file, for every module under `root` (the directory of `package`)."""
    names = {}
    for path in sorted(root.rglob("*.py")):
        parts = [package, *path.relative_to(root).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def _imported(node: ast.AST, module: str, is_package: bool, names: set[str]) -> set[str]:
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names}
    if not isinstance(node, ast.ImportFrom):
        return set()
    base = node.module or ""
    if node.level:
        anchor = module.split(".")
        anchor = anchor[: len(anchor) - node.level + (1 if is_package else 0)]
        base = ".".join([*anchor, base] if base else anchor)
    # `from pkg import name`: the submodule pkg.name when there is one, else pkg itself.
    return {f"{base}.{a.name}" if f"{base}.{a.name}" in names else base for a in node.names}


def import_graph(root: Path, package: str) -> dict[str, set[str]]:
    """Module -> the modules of the same package it imports. A module's own parent packages are
    left out: Python imports them before the module whatever it says."""
    names = module_names(root, package)
    graph: dict[str, set[str]] = {}
    for module, path in names.items():
        is_package = path.name == "__init__.py"
        parents = {module.rsplit(".", n)[0] for n in range(1, module.count(".") + 1)}
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets |= _imported(node, module, is_package, set(names)) & set(names)
        graph[module] = targets - parents - {module}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found
