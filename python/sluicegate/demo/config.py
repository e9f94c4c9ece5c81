"""The demo's world: three simulated model servers, their timing and slots, and the `serve`
settings that put a route with a fallback pool in front of them."""

from __future__ import annotations

from pathlib import Path

from sluicegate.demo.processes import free_port

MODEL = "demo-chat"
# Realistic lengths, mostly streaming.
SHAPE = [
    "--stream-ratio",
    "0.8",
    "--prompt-tokens",
    "lognormal:300:0.6",
    "--output-tokens",
    "lognormal:60:0.5",
]
# Two model servers of different speed, each computing at most 12 requests at once, and a
# smaller spare (4) for the fallback pool.
SIMS = {
    "sim-a": ["--ttft-ms", "lognormal:80:0.3", "--itl-ms", "lognormal:12:0.2"],
    "sim-b": ["--ttft-ms", "lognormal:140:0.3", "--itl-ms", "lognormal:18:0.2"],
    "sim-spare": ["--ttft-ms", "lognormal:100:0.3", "--itl-ms", "lognormal:15:0.2"],
}
SLOTS = {"sim-a": 12, "sim-b": 12, "sim-spare": 4}
MAIN = ("sim-a", "sim-b")


def config(workdir: Path, sims: dict[str, str]) -> tuple[Path, str, str]:
    data, admin = f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"
    providers = "".join(
        f'[[bootstrap.providers]]\nid = "{name}"\nkind = "openai"\n'
        f'base_url = "http://{address}/v1"\n'
        for name, address in sims.items()
    )
    members = ", ".join(
        f'{{ provider_id = "{name}", max_concurrency = {SLOTS[name]} }}' for name in MAIN
    )
    text = f"""
[server]
data_listen = "{data}"
admin_listen = "{admin}"
shutdown_grace_seconds = 10
log_level = "warning"

# The demo is short: the doctor compares the last 40 s (the 30 s overload, its tail, and the
# 10-second slot it started in) with the 30 s before them (the steady load and the drill).
[doctor]
recent_seconds = 40
baseline_seconds = 30

[database]
url = "sqlite:///{workdir}/sluicegate.db"

[[bootstrap.tenants]]
id = "acme"
name = "Acme"

{providers}
[[bootstrap.pools]]
id = "chat"
members = [{members}]
admission = {{ batch = {{ max_depth = 64, max_wait_ms = 10000, weight = 1 }} }}

[[bootstrap.pools]]
id = "chat-fallback"
members = [{{ provider_id = "sim-spare", max_concurrency = {SLOTS["sim-spare"]} }}]
admission = {{ batch = {{ max_depth = 8, max_wait_ms = 10000, weight = 1 }}, tenant_share = 1.0 }}

[[bootstrap.routes]]
alias = "{MODEL}"
chain = [{{ pool = "chat", model = "sim-llm" }}, {{ pool = "chat-fallback", model = "sim-llm" }}]

[[bootstrap.prices]]
model = "{MODEL}"
input_micros_per_mtok = 500000
output_micros_per_mtok = 1500000
"""
    path = workdir / "sluicegate.toml"
    path.write_text(text)
    return path, data, admin
