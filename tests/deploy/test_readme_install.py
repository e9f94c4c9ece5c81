"""README's "Install": every command in it is run by a check, and this test says which (a new
command fails it until it is mapped). The Kubernetes commands that need no cluster are run here
(`--dry-run=client`, where kubectl is installed) and their objects validated; `kubectl apply`
needs a cluster, so what it is given is what tests/deploy/test_manifests.py validates."""

from __future__ import annotations

import base64
import os
import re
import shutil
import subprocess
from pathlib import Path

import kubernetes_validate
import pytest
import yaml
from cryptography.fernet import Fernet

from control.process.settings import load_settings
from tests.deploy.manifests import KUBE, REPO, SECRET, Rendered

# The first words of each command -> (the file of the check that runs it, what that file says).
EXERCISED = {
    "make build-dev && .venv/bin/maturin build --release --sdist --out dist": (
        "Dockerfile", "RUN maturin build --release --sdist --out /dist"),
    "python3 -m venv /opt/sluicegate": ("Dockerfile", "RUN python3 -m venv /opt/sluicegate"),
    '/opt/sluicegate/bin/pip install "$(ls dist/sluicegate-0.1.0-*.whl)[postgres]"': (
        "tests/package/test_installed_wheel.py", 'f"{wheel}[postgres]"'),
    "/opt/sluicegate/bin/sluicegate --version": (
        "tests/package/test_installed_wheel.py", 'run(venv, "--version", cwd=tmp_path)'),
    "make image": ("Makefile", "image-check: build-dev"),
    "docker run --detach --name sluicegate --network host": (
        "tests/image/test_container.py", '"--name", c.name, "--network", "host",'),
    "docker stop --time 65 sluicegate": (
        "tests/image/test_container.py", '["docker", "stop", "--time", "65", c.name]'),
    "kubectl create namespace sluicegate": (
        "tests/deploy/test_readme_install.py", "test_kubectl_commands_make_valid_objects"),
    "kubectl -n sluicegate create secret generic sluicegate-secrets": (
        "tests/deploy/test_readme_install.py", "test_kubectl_commands_make_valid_objects"),
    "kubectl apply -f deploy/kubernetes/rendered/production.yaml": (
        "tests/deploy/test_manifests.py", "def test_rendered_file_is_what_kustomize_makes"),
}  # fmt: skip


def install_commands() -> list[str]:
    readme = (REPO / "README.md").read_text()
    section = readme.split("\n## Install\n", 1)[1].split("\n## ", 1)[0]
    commands = []
    for block in re.findall(r"```sh\n(.*?)```", section, re.S):
        joined = block.replace("\\\n", " ")
        for line in joined.splitlines():
            command = re.sub(r"\s+#\s.*$", "", line).strip()
            if command:
                commands.append(re.sub(r"\s+", " ", command))
    return commands


def test_every_install_command_is_exercised() -> None:
    commands = install_commands()
    assert len(commands) >= len(EXERCISED)
    for command in commands:
        matches = [prefix for prefix in EXERCISED if command.startswith(prefix)]
        assert matches, f"README command not run by any check: {command}"
        path, fragment = EXERCISED[matches[0]]
        assert fragment in (REPO / path).read_text(), (command, path, fragment)
    assert (KUBE / "rendered" / "production.yaml").exists()


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kubectl_commands_make_valid_objects(tmp_path: Path) -> None:
    """`kubectl create ...` run as written, client-side only, pointed at no server at all."""
    made = []
    for command in install_commands():
        if not command.startswith("kubectl ") or " create " not in command:
            continue
        done = subprocess.run(
            ["bash", "-c", f"{command} --dry-run=client -o yaml --server=http://127.0.0.1:9"],
            capture_output=True, text=True, timeout=60,
            env={**os.environ, "KUBECONFIG": os.devnull},
        )  # fmt: skip
        assert done.returncode == 0, (command, done.stderr)
        made.append(yaml.safe_load(done.stdout))
    assert [o["kind"] for o in made] == ["Namespace", "Secret"]
    for obj in made:
        kubernetes_validate.validate(obj, kubernetes_validate.latest_version(), strict=True)
    namespace, secret = made
    rendered = Rendered.load("production")
    assert namespace["metadata"]["name"] == rendered.one("Deployment")["metadata"]["namespace"]
    assert secret["metadata"]["name"] == SECRET
    assert secret["metadata"]["namespace"] == namespace["metadata"]["name"]
    refs = {
        e["valueFrom"]["secretKeyRef"]["key"]
        for e in rendered.env().values()
        if "secretKeyRef" in e.get("valueFrom", {})
    }
    assert set(secret["data"]) == refs
    # The values the README generates are ones serve accepts.
    env = {}
    for name, entry in rendered.env().items():
        ref = entry.get("valueFrom", {}).get("secretKeyRef")
        env[name] = base64.b64decode(secret["data"][ref["key"]]).decode() if ref else "x"
    env["SLUICEGATE_DATA_LISTEN"] = env["SLUICEGATE_ADMIN_LISTEN"] = "127.0.0.1:0"
    config = tmp_path / "sluicegate.toml"
    config.write_text(rendered.config_file())
    settings = load_settings(config, environ=env)
    assert settings.secrets.encryption_key is not None
    Fernet(settings.secrets.encryption_key.get_secret_value())
