"""The TLS phase: the gateway's data port and nginx with the same certificate (ECDSA P-256, one
CA made for the run), side by side, each on one worker pinned to the proxy CPU.

- Handshake cost: new connections per second, with wrk sending `Connection: close` so that each
  request opens a connection, handshakes, asks `GET /healthz` (answered by the proxy itself)
  and closes; the same over plain TCP, so the handshake's share is the difference; and the
  proxy's CPU time per new connection. wrk makes full handshakes (it keeps no session).
- Streaming through TLS: the load generator (HTTP/1.1 over TLS, the CA trusted) against the
  simulator behind each proxy, 20 ms to the first token and one every 10 ms: TTFT p50/p99 and
  requests per second at c=1 and c=64.

Rounds are interleaved (gateway, nginx, gateway, ...) and medians reported: this shared machine's
speed drifts within minutes. Also `python -m bench.tls [--quick]`."""

from __future__ import annotations

import datetime as dt
import ipaddress
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from statistics import median
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from bench import loadgen
from bench.compare import STREAM
from bench.gateway import MODEL, Gateway, start_gateway
from bench.nginx import start_nginx
from bench.procs import Proc, cpus, pinned, start_instant_sim, write_results
from bench.services import free_port

WRK_CONNECTIONS = 16


@dataclass
class Pki:
    ca: Path
    cert: Path
    key: Path


def make_pki(workdir: Path) -> Pki:
    """A CA and a server certificate for 127.0.0.1 signed by it, as PEM files."""
    now = dt.datetime.now(dt.UTC)

    def builder(subject: str, issuer: str, key: ec.EllipticCurvePrivateKey) -> Any:
        return (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
            .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(hours=1))
            .not_valid_after(now + dt.timedelta(days=30))
        )

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        builder("sluicegate bench CA", "sluicegate bench CA", ca_key)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    names = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    leaf = (
        builder("localhost", "sluicegate bench CA", key)
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    pki = Pki(workdir / "ca.pem", workdir / "fullchain.pem", workdir / "privkey.pem")
    pki.ca.write_bytes(ca.public_bytes(pem))
    pki.cert.write_bytes(leaf.public_bytes(pem))
    pki.key.write_bytes(
        key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return pki


def wrk(url: str, seconds: int, cpu: int | None) -> dict[str, float]:
    """New connections per second: one request per connection (`Connection: close`)."""
    cmd = [
        "wrk",
        "-t1",
        f"-c{WRK_CONNECTIONS}",
        f"-d{seconds}s",
        "-H",
        "Connection: close",
        url + "/healthz",
    ]
    done = subprocess.run(pinned(cmd, cpu), capture_output=True, text=True, timeout=seconds + 60)
    if done.returncode != 0:
        raise RuntimeError(f"wrk {url} failed:\n{done.stderr[-2000:]}")
    out = done.stdout
    rate = re.search(r"Requests/sec:\s+([\d.]+)", out)
    total = re.search(r"(\d+) requests in", out)
    errors = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    non_2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if rate is None or total is None:
        raise RuntimeError(f"wrk {url}: unexpected output:\n{out}")
    failed = sum(int(g) for g in errors.groups()) if errors else 0
    failed += int(non_2xx.group(1)) if non_2xx else 0
    print(f"[bench] wrk {url}: {rate.group(1)} new connections/s, {failed} errors", flush=True)
    return {"per_s": float(rate.group(1)), "requests": float(total.group(1)), "errors": failed}


@dataclass
class Target:
    name: str
    url: str
    plain_url: str
    model: str
    key: str | None
    proc: Proc


def run(
    workdir: Path, seconds: int, rounds: int, proxy_cpu: int | None, client_cpu: int | None
) -> dict[str, Any]:
    workdir.mkdir(parents=True, exist_ok=True)
    pki = make_pki(workdir)
    sim, sim_address = start_instant_sim(workdir / "sim", client_cpu)
    procs: list[Proc] = [sim]
    try:
        nginx_port, nginx_tls_port = free_port(), free_port()
        nginx = start_nginx(
            workdir, sim_address, nginx_port, proxy_cpu, tls=(nginx_tls_port, pki.cert, pki.key)
        )
        procs.append(nginx)
        tls_conf = f'[tls]\ncert_file = "{pki.cert}"\nkey_file = "{pki.key}"\n'
        (workdir / "gw-tls").mkdir()
        (workdir / "gw-plain").mkdir()
        gateway: Gateway = start_gateway(workdir / "gw-tls", sim_address, proxy_cpu, extra=tls_conf)
        procs.append(gateway.proc)
        plain: Gateway = start_gateway(workdir / "gw-plain", sim_address, proxy_cpu)
        procs.append(plain.proc)
        targets = [
            Target("gateway", gateway.url, plain.url, MODEL, gateway.key, gateway.proc),
            Target(
                "nginx",
                f"https://127.0.0.1:{nginx_tls_port}",
                f"http://127.0.0.1:{nginx_port}",
                "sim-model",
                None,
                nginx,
            ),
        ]
        runs: dict[str, dict[str, list[dict[str, Any]]]] = {
            t.name: {"tls_conn": [], "plain_conn": [], "stream_c1": [], "stream_c64": []}
            for t in targets
        }
        for i in range(rounds):
            for t in targets:
                before = t.proc.cpu_seconds()
                tls = wrk(t.url, seconds, client_cpu)
                tls["cpu_ms_per_connection"] = (
                    1000 * (t.proc.cpu_seconds() - before) / max(tls["requests"], 1)
                )
                runs[t.name]["tls_conn"].append(tls)
                # The plain gateway is its own process: its CPU is not the TLS one's.
                runs[t.name]["plain_conn"].append(wrk(t.plain_url, seconds, client_cpu))
                for level, concurrency in (("stream_c1", "1"), ("stream_c64", "64")):
                    runs[t.name][level].append(
                        loadgen.run(
                            workdir,
                            f"tls-{level}-{t.name}-{i + 1}",
                            t.url,
                            [
                                *STREAM,
                                "--concurrency",
                                concurrency,
                                "--model",
                                t.model,
                                "--duration",
                                f"{seconds}s",
                                "--ca-file",
                                str(pki.ca),
                            ],
                            client_cpu,
                            t.key,
                        )
                    )
    finally:
        for proc in reversed(procs):
            proc.stop()
    return summary(runs)


def summary(runs: dict[str, dict[str, list[dict[str, Any]]]]) -> dict[str, Any]:
    def med(values: list[float]) -> float:
        return round(float(median(values)), 3)

    out: dict[str, Any] = {"certificate": "ECDSA P-256, one CA", "wrk_connections": WRK_CONNECTIONS}
    for name, r in runs.items():
        out[name] = {
            "tls_connections_per_s": med([x["per_s"] for x in r["tls_conn"]]),
            "plain_connections_per_s": med([x["per_s"] for x in r["plain_conn"]]),
            "cpu_ms_per_tls_connection": med([x["cpu_ms_per_connection"] for x in r["tls_conn"]]),
            "connection_errors": int(sum(x["errors"] for x in r["tls_conn"] + r["plain_conn"])),
            "stream": {
                level: {
                    "ttft_p50_ms": med([x["ttft_ms"]["p50"] or 0 for x in r[level]]),
                    "ttft_p99_ms": med([x["ttft_ms"]["p99"] or 0 for x in r[level]]),
                    "requests_per_s": med([x["requests_per_s"] for x in r[level]]),
                    "errors": int(sum(x["errors"] for x in r[level])),
                }
                for level in ("stream_c1", "stream_c64")
            },
        }
    out["rounds"] = len(next(iter(runs.values()))["tls_conn"])
    return out


def markdown(data: dict[str, Any]) -> str:
    if "skipped" in data:
        return f"## TLS\n\nSkipped: {data['skipped']}."
    g, n = data["gateway"], data["nginx"]
    rows = [
        ("new TLS connections/s", "tls_connections_per_s"),
        ("new plain connections/s", "plain_connections_per_s"),
        ("proxy CPU ms per TLS connection", "cpu_ms_per_tls_connection"),
        ("connection errors", "connection_errors"),
    ]
    lines = [
        "## TLS: the data port against nginx, same certificate",
        "",
        f"{data['certificate']}; one proxy worker each; wrk -c{data['wrk_connections']} with "
        "`Connection: close` (one request, one full handshake per connection) on `/healthz`;",
        "streams over HTTP/1.1 through TLS (20 ms TTFT, 10 ms per token, 30 tokens). Medians of "
        f"{data['rounds']} interleaved rounds.",
        "",
        "| | gateway | nginx |",
        "|---|---:|---:|",
    ]
    lines += [f"| {label} | {g[k]} | {n[k]} |" for label, k in rows]
    for level, label in (("stream_c1", "c=1"), ("stream_c64", "c=64")):
        gs, ns = g["stream"][level], n["stream"][level]
        lines += [
            f"| stream {label} TTFT p50 ms | {gs['ttft_p50_ms']} | {ns['ttft_p50_ms']} |",
            f"| stream {label} TTFT p99 ms | {gs['ttft_p99_ms']} | {ns['ttft_p99_ms']} |",
            f"| stream {label} req/s | {gs['requests_per_s']} | {ns['requests_per_s']} |",
            f"| stream {label} errors | {gs['errors']} | {ns['errors']} |",
        ]
    return "\n".join(lines)


def main() -> int:
    """`python -m bench.tls [--quick]`: the TLS phase alone, to bench/results/tls.*."""
    quick = "--quick" in sys.argv[1:]
    proxy_cpu, client_cpu = cpus()
    with tempfile.TemporaryDirectory(prefix="sluicegate-bench-tls-") as tmp:
        data = run(Path(tmp), 3 if quick else 8, 2 if quick else 3, proxy_cpu, client_cpu)
    write_results("tls-quick" if quick else "tls", data, markdown(data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
