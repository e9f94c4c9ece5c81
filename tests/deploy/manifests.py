"""The Kubernetes manifests under deploy/kubernetes/, read for the tests: the base's files, each
overlay's rendered result (`make manifests`) and the examples."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
KUBE = REPO / "deploy" / "kubernetes"
OVERLAYS = sorted(p.name for p in (KUBE / "overlays").iterdir() if p.is_dir())
HEADER = (
    "# Rendered by `make manifests` (kubectl kustomize deploy/kubernetes/overlays/{name}): edit\n"
    "# the base or the overlay, not this file.\n"
)
SECRET = "sluicegate-secrets"


def documents(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def resource_files() -> list[Path]:
    """Every file of whole Kubernetes objects: the base's, the rendered overlays, the examples
    (an overlay's patches are partial objects, validated once rendered)."""
    files = [*(KUBE / "base").glob("*.yaml"), *(KUBE / "rendered").glob("*.yaml")]
    files += [*(KUBE / "examples").glob("*.yaml")]
    return sorted(p for p in files if p.name != "kustomization.yaml")


@dataclass
class Rendered:
    """One overlay's rendered objects, with what the tests look at most."""

    name: str
    objects: list[dict[str, Any]]

    @classmethod
    def load(cls, name: str) -> Rendered:
        return cls(name, documents(KUBE / "rendered" / f"{name}.yaml"))

    def one(self, kind: str, name: str | None = None) -> dict[str, Any]:
        found = [
            o
            for o in self.objects
            if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)
        ]
        assert len(found) == 1, (kind, name, [o["metadata"]["name"] for o in found])
        return found[0]

    def all(self, kind: str) -> list[dict[str, Any]]:
        return [o for o in self.objects if o["kind"] == kind]

    @property
    def pod(self) -> dict[str, Any]:
        spec: dict[str, Any] = self.one("Deployment")["spec"]["template"]
        return spec

    @property
    def container(self) -> dict[str, Any]:
        (container,) = self.pod["spec"]["containers"]
        return container

    def env(self) -> dict[str, dict[str, Any]]:
        """The container's env by name: each entry as written (`value` or `valueFrom`)."""
        return {e["name"]: e for e in self.container.get("env", [])}

    def config_file(self) -> str:
        """The TOML that `serve --config PATH` reads: the ConfigMap key mounted at PATH."""
        args = self.container["args"]
        path = Path(args[args.index("--config") + 1])
        mounts = {m["name"]: Path(m["mountPath"]) for m in self.container["volumeMounts"]}
        volumes = {v["name"]: v for v in self.pod["spec"]["volumes"]}
        (volume,) = [n for n, m in mounts.items() if m == path.parent]
        config_map = self.one("ConfigMap", volumes[volume]["configMap"]["name"])
        text: str = config_map["data"][path.name]
        return text
