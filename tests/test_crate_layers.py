"""The bench tools (simulator, load generator) share no code with the gateway they measure: their
crate never depends on `proxy_core`, and `proxy_core` uses it only in `py.rs`, to expose them to
Python, and only when the bindings are built."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
TOOLS = "sluicegate_tools"
CORE = "proxy_core"
TOOLS_PATH = re.compile(rf"\b{TOOLS}\b")


def workspace_metadata() -> dict[str, Any]:
    cargo = shutil.which("cargo")
    assert cargo, "cargo is needed to read the workspace (the Makefile's lint runs it too)"
    out = subprocess.run(
        [cargo, "metadata", "--format-version", "1", "--no-deps", "--offline"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    metadata: dict[str, Any] = json.loads(out.stdout)
    return metadata


def reaches(metadata: dict[str, Any], start: str, goal: str) -> list[str] | None:
    """A chain of workspace packages from `start` to `goal` through dependencies of any kind."""
    members = {p["name"]: p for p in metadata["packages"]}
    paths = {Path(p["manifest_path"]).parent.resolve(): p["name"] for p in members.values()}
    chains = [[start]]
    seen = {start}
    while chains:
        chain = chains.pop()
        for dep in members[chain[-1]]["dependencies"]:
            name = paths.get(Path(dep["path"]).resolve()) if dep.get("path") else None
            name = name or (dep["name"] if dep["name"] in members else None)
            if name == goal:
                return [*chain, goal]
            if name and name not in seen:
                seen.add(name)
                chains.append([*chain, name])
    return None


def tools_uses_outside_bindings(core_dir: Path) -> list[str]:
    """Files of the core, other than `src/py.rs`, that name the tools crate."""
    return sorted(
        str(path.relative_to(core_dir))
        for path in core_dir.rglob("*.rs")
        if path.relative_to(core_dir) != Path("src/py.rs") and TOOLS_PATH.search(path.read_text())
    )


def enabled_only_by_bindings(metadata: dict[str, Any]) -> bool:
    core = next(p for p in metadata["packages"] if p["name"] == CORE)
    deps = [d for d in core["dependencies"] if d["name"] == TOOLS]
    enabling = sorted(f for f, items in core["features"].items() if f"dep:{TOOLS}" in items)
    return all(d["optional"] for d in deps) and enabling in ([], ["python"])


def test_the_tools_crate_lives_under_bench_and_never_depends_on_the_core() -> None:
    metadata = workspace_metadata()
    tools = next(p for p in metadata["packages"] if p["name"] == TOOLS)
    assert Path(tools["manifest_path"]).parent == ROOT / "bench" / "tools"
    assert reaches(metadata, TOOLS, CORE) is None
    assert reaches(metadata, CORE, TOOLS) == [CORE, TOOLS]  # the bindings expose the tools


def test_the_core_uses_the_tools_only_in_its_bindings() -> None:
    assert tools_uses_outside_bindings(ROOT / CORE) == []
    assert TOOLS_PATH.search((ROOT / CORE / "src" / "py.rs").read_text())
    assert enabled_only_by_bindings(workspace_metadata())


def test_the_checks_catch_a_violation(tmp_path: Path) -> None:
    (tmp_path / "src" / "proxy").mkdir(parents=True)
    (tmp_path / "src" / "py.rs").write_text("use sluicegate_tools::sim::Simulator;\n")
    (tmp_path / "src" / "proxy" / "relay.rs").write_text("use sluicegate_tools::loadgen;\n")
    assert tools_uses_outside_bindings(tmp_path) == ["src/proxy/relay.rs"]

    def package(name: str, deps: list[str], features: dict[str, list[str]]) -> dict[str, Any]:
        dependencies = [
            {"name": d, "path": str(tmp_path / d), "optional": d == TOOLS} for d in deps
        ]
        manifest = str(tmp_path / name / "Cargo.toml")
        return {
            "name": name,
            "manifest_path": manifest,
            "dependencies": dependencies,
            "features": features,
        }

    through_a_helper = {
        "packages": [
            package(TOOLS, ["helper"], {}),
            package("helper", [CORE], {}),
            package(CORE, [TOOLS], {"default": [f"dep:{TOOLS}"]}),
        ]
    }
    assert reaches(through_a_helper, TOOLS, CORE) == [TOOLS, "helper", CORE]
    assert not enabled_only_by_bindings(through_a_helper)


@pytest.mark.parametrize("name", ["sim", "loadgen", "dist.rs"])
def test_the_tools_left_the_core(name: str) -> None:
    assert not (ROOT / CORE / "src" / name).exists()
    assert (ROOT / "bench" / "tools" / "src" / name).exists()
