"""What the usage tests of `sluicegate serve` share: a serve process that can be killed and
started again on the same database and journal, streaming load that follows it across restarts,
and the comparison of the SQL ledger with the simulator's record."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import sqlalchemy as sa

from tests.e2e.helpers import ENCRYPTION_KEY, PEPPER, UPSTREAM_SECRET

LISTENING = re.compile(r"listening on http://(\S+) \(admin http://(\S+)\)")
ADMIN_TOKEN = "sgt_e2e-ledger-admin-token-0123456789"
MAX_TOKENS = 20
# 40 characters: 10 prompt tokens by the gateway's estimate and the simulator's count alike.
BODY = {
    "model": "chat",
    "stream": True,
    "max_tokens": MAX_TOKENS,
    "messages": [{"role": "user", "content": "y" * 40}],
}


def write_config(tmp: Path, database_url: str, grace: float = 10.0) -> Path:
    config = tmp / "sluicegate.toml"
    config.write_text(
        f"""
[server]
data_listen = "127.0.0.1:0"
admin_listen = "127.0.0.1:0"
shutdown_grace_seconds = {grace}

[database]
url = "{database_url}"

[secrets]
key_pepper = "{PEPPER}"
encryption_key = "{ENCRYPTION_KEY}"
admin_token = "{ADMIN_TOKEN}"

[core]
workers = 2

[usage]
journal_dir = "{tmp / "journal"}"
drain_timeout_ms = 50
"""
    )
    return config


@dataclass
class Serve:
    """`sluicegate serve` on one config (database and journal), started again after each end."""

    tmp: Path
    config: Path
    runs: int = 0
    popen: subprocess.Popen[str] | None = None
    log: Path | None = None
    # The data plane's URL while a process listens; None between processes.
    url: str | None = None
    admin: str | None = None

    def spawn(self) -> None:
        """Start a process and return at once (it may be killed before it listens)."""
        self.runs += 1
        self.log = self.tmp / f"serve-{self.runs}.log"
        with open(self.log, "w") as out:
            self.popen = subprocess.Popen(
                [sys.executable, "-m", "sluicegate", "serve", "--config", str(self.config)],
                stdout=out,
                stderr=subprocess.STDOUT,
                text=True,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )

    def wait_listening(self, timeout: float = 60) -> None:
        assert self.popen is not None and self.log is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.log.read_text()
            match = LISTENING.search(text)
            if match:
                self.url, self.admin = f"http://{match.group(1)}", match.group(2)
                return
            if self.popen.poll() is not None:
                raise AssertionError(f"serve exited early:\n{text}")
            time.sleep(0.02)
        raise AssertionError(f"serve did not start in {timeout}s:\n{self.log.read_text()}")

    def wait_for_log(self, *texts: str, timeout: float) -> str | None:
        """The first of `texts` the log shows, or None after `timeout`."""
        assert self.log is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            log = self.log.read_text()
            for text in texts:
                if text in log:
                    return text
            time.sleep(0.005)
        return None

    def start(self) -> None:
        self.spawn()
        self.wait_listening()

    def kill(self) -> None:
        """SIGKILL, listening or not."""
        self.url = None
        if self.popen is not None and self.popen.poll() is None:
            self.popen.kill()
            self.popen.wait(10)

    def terminate(self, timeout: float = 60) -> int:
        """SIGTERM and wait for the exit; returns its status."""
        assert self.popen is not None
        self.popen.send_signal(signal.SIGTERM)
        status = self.popen.wait(timeout)
        self.url = None
        return status

    def api(self, method: str, path: str, body: Any = None) -> Any:
        assert self.admin is not None
        response = httpx.request(
            method,
            f"http://{self.admin}{path}",
            json=body,
            headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
            timeout=30,
        )
        assert response.status_code < 300, response.text
        return response.json()

    def metric(self, name: str) -> float:
        assert self.admin is not None
        text = httpx.get(f"http://{self.admin}/metrics", timeout=30).text
        for line in text.splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
        raise AssertionError(f"{name} not in /metrics")


def set_up(serve: Serve, sim_address: str) -> str:
    """Provider, pool, route, tenant and key through the admin API; returns the key."""
    serve.api(
        "POST",
        "/v1/admin/providers",
        {
            "id": "sim",
            "kind": "openai",
            "base_url": f"http://{sim_address}/v1",
            "credential": UPSTREAM_SECRET,
        },
    )
    serve.api("POST", "/v1/admin/pools", {"id": "sims", "members": [{"provider_id": "sim"}]})
    serve.api(
        "POST", "/v1/admin/routes", {"alias": "chat", "chain": [{"pool": "sims", "model": "m"}]}
    )
    serve.api("POST", "/v1/admin/tenants", {"id": "acme", "name": "Acme"})
    key: str = serve.api("POST", "/v1/admin/keys", {"tenant_id": "acme", "name": "load"})["key"]
    return key


def is_content(line: str) -> bool:
    """An SSE data line carrying generated text (what the gateway counts as a content event)."""
    if not line.startswith("data: {"):
        return False
    try:
        choices = json.loads(line[6:]).get("choices") or []
    except ValueError:
        return False
    return any((c.get("delta") or {}).get("content") for c in choices)


@dataclass
class Load:
    """Streaming chat requests from `threads` clients, following the gateway across restarts
    (a refused connection waits a little and tries the current address again). `received`:
    content events each request's client got (by `x-request-id`), counted line by line, so a
    stream cut by a kill counts what arrived before the cut."""

    serve: Serve
    key: str
    threads: int = 6
    body: dict[str, Any] = field(default_factory=lambda: BODY)
    outcomes: Counter[str] = field(default_factory=Counter)
    received: dict[str, int] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _workers: list[threading.Thread] = field(default_factory=list)

    def start(self) -> None:
        for i in range(self.threads):
            worker = threading.Thread(target=self._run, name=f"load-{i}", daemon=True)
            worker.start()
            self._workers.append(worker)

    def stop(self) -> None:
        self._stop.set()
        for worker in self._workers:
            worker.join(30)

    def _run(self) -> None:
        headers = {"Authorization": f"Bearer {self.key}"}
        with httpx.Client(timeout=httpx.Timeout(10, connect=1)) as client:
            while not self._stop.is_set():
                url = self.serve.url
                if url is None:
                    time.sleep(0.02)
                    continue
                try:
                    with client.stream(
                        "POST", url + "/v1/chat/completions", json=self.body, headers=headers
                    ) as response:
                        last = self._read(response)
                    if response.status_code != 200:
                        self.outcomes[f"http {response.status_code}"] += 1
                    elif last == "data: [DONE]":
                        self.outcomes["complete"] += 1
                    else:
                        self.outcomes["truncated"] += 1
                except httpx.HTTPError:
                    self.outcomes["cut"] += 1
                    time.sleep(0.02)

    def _read(self, response: httpx.Response) -> str:
        """Read a response line by line, counting its content events as they arrive; returns
        its last non-empty line."""
        request_id = response.headers.get("x-request-id")
        events, last = 0, ""
        try:
            for line in response.iter_lines():
                if line:
                    last = line
                    events += is_content(line)
        finally:
            if request_id is not None and response.status_code == 200:
                self.received[request_id] = events
        return last


def ledger(database_url: str) -> list[dict[str, Any]]:
    engine = sa.create_engine(database_url)
    with engine.connect() as conn:
        rows = conn.execute(
            sa.text(
                "SELECT request_id, status, outcome, usage_source, prompt_tokens, "
                "completion_tokens FROM usage_records"
            )
        ).mappings()
        out = [dict(r) for r in rows]
        rollups = conn.execute(
            sa.text(
                "SELECT sum(requests), sum(prompt_tokens), sum(completion_tokens) "
                "FROM usage_rollups WHERE granularity = 'day'"
            )
        ).one()
    engine.dispose()
    raw = (len(out), sum(r["prompt_tokens"] for r in out), sum(r["completion_tokens"] for r in out))
    # Rollups were added for the rows actually inserted only: a replayed event counts once.
    assert tuple(int(v or 0) for v in rollups) == raw
    return out


def compare(rows: list[dict[str, Any]], record: list[dict[str, Any]]) -> dict[str, int]:
    """The ledger against the simulator's record, under the billing policy of ARCHITECTURE.md:
    a request that ended in the gateway is billed what the upstream reported; one the gateway
    died in (`interrupted`, found as a begin record without its end at the next start) is billed
    its prompt and the content events its latest progress record counted (never more than the
    upstream produced), whether or not the upstream got it."""
    ids = Counter(r["request_id"] for r in rows)
    assert not [i for i, n in ids.items() if n > 1], "duplicate usage rows"
    seen = Counter(r["request_id"] for r in record)
    assert not [i for i, n in seen.items() if n > 1], "the simulator saw a request twice"
    by_id = {r["request_id"]: r for r in rows}
    truth = {r["request_id"]: r for r in record}

    missing = sorted(set(truth) - set(by_id))
    assert not missing, f"{len(missing)} requests the simulator served have no usage row"
    unseen = [by_id[i] for i in set(by_id) - set(truth)]
    # Begun in the gateway, killed before the upstream had the request: interrupted only, and
    # nothing relayed.
    assert all(r["outcome"] == "interrupted" for r in unseen), unseen[:3]
    assert all(r["completion_tokens"] == 0 for r in unseen), unseen[:3]

    counts: Counter[str] = Counter()
    for request_id, sim in truth.items():
        row = by_id[request_id]
        if row["outcome"] == "interrupted":
            assert row["status"] == 499, row
            # Billed from a progress record (or the upstream's count it carried), else from the
            # begin record alone: nothing relayed that the journal knew of.
            if row["completion_tokens"] > 0:
                assert row["usage_source"] in ("progress", "upstream"), row
            else:
                assert row["usage_source"] in ("estimated", "progress", "upstream"), row
            assert row["prompt_tokens"] == sim["prompt_tokens"], (row, sim)
            assert 0 <= row["completion_tokens"] <= sim["completion_tokens"], (row, sim)
            counts["interrupted"] += 1
            counts["interrupted_with_progress"] += row["completion_tokens"] > 0
        else:
            assert (row["outcome"], row["usage_source"]) == ("complete", "upstream"), row
            assert (row["prompt_tokens"], row["completion_tokens"]) == (
                sim["prompt_tokens"],
                sim["completion_tokens"],
            ), (row, sim)
            counts["complete"] += 1
    counts["interrupted_unseen"] = len(unseen)
    # Token sums, the same under the policy.
    billed_prompt = sum(r["prompt_tokens"] for r in rows)
    expected_prompt = sum(s["prompt_tokens"] for s in record) + sum(
        r["prompt_tokens"] for r in unseen
    )
    assert billed_prompt == expected_prompt
    return dict(counts)


def compare_received(rows: list[dict[str, Any]], received: dict[str, int], bound: int) -> int:
    """Each request's billed completion tokens against the content events its client received
    (one token each): never more, and an interrupted one at most `bound` fewer. Returns the
    largest shortfall seen."""
    worst = 0
    for row in rows:
        got = received.get(row["request_id"])
        if got is None:
            # No response reached the client: nothing was relayed, nothing is billed for it.
            assert row["completion_tokens"] == 0, row
            continue
        assert row["completion_tokens"] <= got, (row, got)
        if row["outcome"] == "interrupted":
            worst = max(worst, got - row["completion_tokens"])
            assert got - row["completion_tokens"] <= bound, (row, got, bound)
    return worst
