"""The Prometheus alert rules shipped in deploy/prometheus/: valid (`promtool check rules`) and
each alert proven by its unit test with sample series (`promtool test rules`)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml

from tests.e2e.test_observability import promtool

RULES = Path(__file__).resolve().parents[2] / "deploy" / "prometheus"


def test_the_rules_are_valid() -> None:
    done = subprocess.run(
        [promtool(), "check", "rules", str(RULES / "sluicegate-alerts.yml")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_alert_has_a_unit_test_and_they_pass() -> None:
    rules = yaml.safe_load((RULES / "sluicegate-alerts.yml").read_text())
    alerts = {r["alert"] for g in rules["groups"] for r in g["rules"] if "alert" in r}
    tests = yaml.safe_load((RULES / "sluicegate-alerts.test.yml").read_text())["tests"]
    tested = {
        case["alertname"]
        for t in tests
        for case in t.get("alert_rule_test", [])
        if case.get("exp_alerts")
    }
    assert alerts == tested, f"alerts without a firing test: {alerts - tested}"
    done = subprocess.run(
        [promtool(), "test", "rules", "sluicegate-alerts.test.yml"],
        cwd=RULES,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout
