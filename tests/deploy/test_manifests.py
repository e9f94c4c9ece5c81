"""The Kubernetes manifests: valid against the API's schemas offline (kubernetes-validate, strict:
an unknown field fails), each overlay's rendered file what kustomize makes of it, the objects
wired to one another, and every setting, env name, port and probe one that `serve` reads
(tests/deploy/test_probes_live.py runs `serve` on the rendered settings)."""

from __future__ import annotations

import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import kubernetes_validate
import pytest

from control.process.listen import HostPort
from control.process.settings import ENV, Settings, load_settings
from tests.deploy.manifests import (
    HEADER,
    KUBE,
    OVERLAYS,
    REPO,
    SECRET,
    Rendered,
    documents,
    resource_files,
)

# The oldest Kubernetes the manifests promise to work on, and the newest the schemas know.
VERSIONS = ("1.29.0", kubernetes_validate.latest_version())
PLACEHOLDERS = {
    "SLUICEGATE_DATABASE_URL": "postgresql+psycopg://sluicegate@db:5432/sluicegate",
    "SLUICEGATE_REDIS_URL": "redis://redis:6379/0",
    "SLUICEGATE_KEY_PEPPER": "p" * 32,
    "SLUICEGATE_ENCRYPTION_KEY": "ZTJlLUNBTkFSWS1lbmNyeXB0aW9uLWtleS0wMTIzNDU=",
    "SLUICEGATE_ADMIN_TOKEN": "sgt_" + "t" * 40,
    "SLUICEGATE_FLEET_NAME": "sluicegate-0",
}


def test_overlays_and_rendered_files_correspond() -> None:
    rendered = sorted(p.stem for p in (KUBE / "rendered").glob("*.yaml"))
    assert rendered == OVERLAYS and OVERLAYS


@pytest.mark.parametrize("path", resource_files(), ids=lambda p: str(p.relative_to(KUBE)))
def test_valid_against_the_api_schemas(path: Path) -> None:
    for doc in documents(path):
        if doc["kind"] == "ServiceMonitor":
            continue  # a CRD: no schema offline; test_the_service_monitor_scrapes_the_admin_port
        for version in VERSIONS:
            try:
                kubernetes_validate.validate(doc, version, strict=True)
            except kubernetes_validate.ValidationError as e:
                pytest.fail(f"{path.name} {doc['kind']} (Kubernetes {version}): {e.message}")


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl (1.21+) renders kustomize")
@pytest.mark.parametrize("overlay", OVERLAYS)
def test_rendered_file_is_what_kustomize_makes(overlay: str) -> None:
    done = subprocess.run(
        ["kubectl", "kustomize", str(KUBE / "overlays" / overlay)],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    committed = (KUBE / "rendered" / f"{overlay}.yaml").read_text()
    assert committed == HEADER.format(name=overlay) + done.stdout, "run `make manifests`"


def settings_of(rendered: Rendered, tmp_path: Path) -> Settings:
    """What `serve` makes of the rendered ConfigMap and the Deployment's env: secrets and
    values Kubernetes fills in are stand-ins; any unknown option or bad value fails."""
    config = tmp_path / "sluicegate.toml"
    config.write_text(rendered.config_file())
    env = {}
    for name, entry in rendered.env().items():
        env[name] = entry["value"] if "value" in entry else PLACEHOLDERS[name]
    return load_settings(config, environ=env)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_env_names_and_settings_are_what_serve_reads(overlay: str, tmp_path: Path) -> None:
    rendered = Rendered.load(overlay)
    env = rendered.env()
    unknown = sorted(set(env) - set(ENV))
    assert not unknown, f"serve reads no such variable: {unknown}"
    settings = settings_of(rendered, tmp_path)
    # An option set in the file and by the env is the env's: the file's value would be dead.
    file_options = {
        (section, key)
        for section, table in tomllib.loads(rendered.config_file()).items()
        for key in table
    }
    shadowed = sorted(name for name in env if ENV[name] in file_options)
    assert not shadowed, f"set in the ConfigMap and overridden by the env: {shadowed}"
    # Secrets come from the Secret, never from a literal or the ConfigMap.
    for name in ("SLUICEGATE_KEY_PEPPER", "SLUICEGATE_ENCRYPTION_KEY", "SLUICEGATE_ADMIN_TOKEN",
                 "SLUICEGATE_DATABASE_URL", "SLUICEGATE_REDIS_URL"):  # fmt: skip
        assert env[name]["valueFrom"]["secretKeyRef"]["name"] == SECRET, name
    assert settings.database.url.startswith("postgresql+psycopg://")
    assert settings.redis.url is not None


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_ports_probes_and_drain_match_serve(overlay: str, tmp_path: Path) -> None:
    rendered = Rendered.load(overlay)
    settings = settings_of(rendered, tmp_path)
    ports = {p["name"]: p["containerPort"] for p in rendered.container["ports"]}
    assert ports == {
        "http": HostPort.parse(settings.server.data_listen).port,
        "admin": HostPort.parse(settings.server.admin_listen).port,
    }
    container = rendered.container
    # The probes ask the data plane, on the data port (the core answers them without a key).
    for probe, path in (("startupProbe", "/healthz"), ("livenessProbe", "/healthz"),
                        ("readinessProbe", "/readyz")):  # fmt: skip
        assert container[probe]["httpGet"] == {"path": path, "port": "http"}, probe
    # SIGKILL only after the preStop delay, the unready window, the in-flight grace and the
    # usage drainer's as long again (control/process/serve.py) have all run out.
    pre_stop = container["lifecycle"]["preStop"]["exec"]["command"]
    assert pre_stop[0] == "sleep"
    drain = settings.server.unready_seconds + 2 * settings.server.shutdown_grace_seconds
    assert rendered.pod["spec"]["terminationGracePeriodSeconds"] >= float(pre_stop[1]) + drain
    # The journal lives on the pod's state volume, mounted where the image keeps its state.
    mounts = {Path(m["mountPath"]): m["name"] for m in container["volumeMounts"]}
    journal = settings.usage.journal_dir
    assert journal is not None and mounts[Path("/var/lib/sluicegate")] == "state"
    assert journal.is_relative_to("/var/lib/sluicegate")


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_objects_are_wired_together(overlay: str) -> None:
    rendered = Rendered.load(overlay)
    deployment = rendered.one("Deployment")
    pod_labels = rendered.pod["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    ports = {p["name"] for p in rendered.container["ports"]}
    for service in rendered.all("Service"):
        assert service["spec"]["selector"].items() <= pod_labels.items()
        assert {p["targetPort"] for p in service["spec"]["ports"]} <= ports
    pdb = rendered.one("PodDisruptionBudget")
    assert pdb["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    hpa = rendered.one("HorizontalPodAutoscaler")
    assert hpa["spec"]["scaleTargetRef"]["name"] == deployment["metadata"]["name"]
    assert hpa["spec"]["minReplicas"] >= 2 and pdb["spec"]["maxUnavailable"] == 1
    # The image the Makefile's `make image` names, run as the user its Dockerfile creates.
    version = re.search(r'^version = "(.+)"', (REPO / "pyproject.toml").read_text(), re.M)
    assert version and rendered.container["image"] == f"sluicegate:{version.group(1)}"
    assert rendered.pod["spec"]["securityContext"]["runAsUser"] == 10001
    assert "USER 10001:10001" in (REPO / "Dockerfile").read_text()
    account = rendered.one("ServiceAccount")
    assert rendered.pod["spec"]["serviceAccountName"] == account["metadata"]["name"]
    # No Secret in the manifests: the operator makes it (README, "Install").
    assert not rendered.all("Secret")


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_service_monitor_scrapes_the_admin_port(overlay: str) -> None:
    rendered = Rendered.load(overlay)
    monitor = rendered.one("ServiceMonitor")
    selected = [
        s
        for s in rendered.all("Service")
        if monitor["spec"]["selector"]["matchLabels"].items() <= s["metadata"]["labels"].items()
    ]
    assert [s["metadata"]["name"] for s in selected] == ["sluicegate-admin"]
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["path"] == "/metrics"
    assert endpoint["port"] in {p["name"] for p in selected[0]["spec"]["ports"]}
    assert set(monitor["spec"]) == {"selector", "endpoints"}
    assert set(endpoint) <= {"port", "path", "interval"}


def test_secret_keys_are_the_ones_the_readme_creates() -> None:
    readme = (REPO / "README.md").read_text()
    created = set(re.findall(r"--from-literal=([a-z-]+)=", readme))
    for overlay in OVERLAYS:
        refs = {
            e["valueFrom"]["secretKeyRef"]["key"]
            for e in Rendered.load(overlay).env().values()
            if "secretKeyRef" in e.get("valueFrom", {})
        }
        assert refs == created, overlay
