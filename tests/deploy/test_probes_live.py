"""`serve` started as the production overlay configures it (its ConfigMap's file, its
Deployment's env) and asked what Kubernetes will ask: the probes' paths on the data port, the
ServiceMonitor's path on the admin port, and the image's HEALTHCHECK module on the same address.

Only what this machine cannot provide is changed: the listen addresses (loopback, port 0 instead
of every address on 8080/8081), SQLite instead of the Secret's PostgreSQL URL, no Redis, and a
journal directory of the test's own."""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path

import httpx
from sluicegate.healthcheck import probe

from tests.deploy.manifests import Rendered
from tests.support.procs import start_cli

STAND_INS = {
    "SLUICEGATE_DATA_LISTEN": "127.0.0.1:0",
    "SLUICEGATE_ADMIN_LISTEN": "127.0.0.1:0",
    "SLUICEGATE_KEY_PEPPER": "p" * 32,
    "SLUICEGATE_ENCRYPTION_KEY": "ZTJlLUNBTkFSWS1lbmNyeXB0aW9uLWtleS0wMTIzNDU=",
    "SLUICEGATE_ADMIN_TOKEN": "sgt_" + "t" * 40,
    "SLUICEGATE_FLEET_NAME": "sluicegate-0",
}


def test_probes_answer_where_the_manifests_look(tmp_path: Path) -> None:
    rendered = Rendered.load("production")
    config = tmp_path / "sluicegate.toml"
    config.write_text(rendered.config_file())
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLUICEGATE_")}
    for name, entry in rendered.env().items():
        if name in ("SLUICEGATE_DATABASE_URL", "SLUICEGATE_REDIS_URL"):
            continue
        env[name] = STAND_INS.get(name, entry.get("value", ""))
        assert env[name], name
    env["SLUICEGATE_DATABASE_URL"] = f"sqlite:///{tmp_path}/sluicegate.db"
    env["SLUICEGATE_USAGE_JOURNAL_DIR"] = str(tmp_path / "journal")
    proc = start_cli(["serve", "--config", str(config)], tmp_path / "serve.log", 60, env=env)
    try:
        admin = re.search(r"\(admin http://(\S+)\)", proc.log.read_text())
        assert admin, proc.log.read_text()
        container = rendered.container
        for name in ("startupProbe", "livenessProbe", "readinessProbe"):
            answer = httpx.get(f"{proc.url}{container[name]['httpGet']['path']}", timeout=5)
            assert answer.status_code == 200, (name, answer.text)
        (endpoint,) = rendered.one("ServiceMonitor")["spec"]["endpoints"]
        metrics = httpx.get(f"http://{admin.group(1)}{endpoint['path']}", timeout=30)
        assert metrics.status_code == 200 and "sluicegate_" in metrics.text
        assert probe(proc.address) is None
        # The JSON log lines the ConfigMap asks for.
        assert '"level"' in proc.log.read_text() or '"levelname"' in proc.log.read_text()
        assert proc.stop(signal.SIGTERM, timeout=60) == 0
        problem = probe(proc.address, timeout=1)
        assert problem is not None and "refused" in problem.lower()
    finally:
        proc.kill()
