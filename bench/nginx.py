"""nginx as the baseline proxy: installed from Debian if missing, one worker, keep-alive to the
upstream, no buffering (so streams pass frame by frame); optionally a second port with TLS
(the bench's TLS phase, the gateway's certificate)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from bench.procs import Proc, start

CONF = """
worker_processes 1;
daemon off;
error_log {prefix}/error.log warn;
pid {prefix}/nginx.pid;
events {{ worker_connections 20000; }}
http {{
    access_log off;
    client_body_temp_path {prefix}/body;
    proxy_temp_path {prefix}/proxy;
    fastcgi_temp_path {prefix}/fastcgi;
    uwsgi_temp_path {prefix}/uwsgi;
    scgi_temp_path {prefix}/scgi;
    upstream sim {{ server {upstream}; keepalive 1024; }}
    server {{
        listen 127.0.0.1:{port};
{locations}
    }}
{tls}
}}
"""
LOCATIONS = """
        location = /healthz {{ return 200 "ok"; }}
        location / {{
            proxy_pass http://sim;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
            proxy_request_buffering off;
            tcp_nodelay on;
        }}"""
# TLS as the gateway's data port has it: TLS 1.2 and 1.3, session tickets on (nginx's default).
TLS = """
    server {{
        listen 127.0.0.1:{port} ssl;
        ssl_certificate {cert};
        ssl_certificate_key {key};
        ssl_protocols TLSv1.2 TLSv1.3;
{locations}
    }}"""


# An upstream that answers every request at once with the same small chat completion (about
# 300 bytes): cheaper than the simulator, so the client's CPU is not spent on the upstream.
INSTANT = """
worker_processes 1;
daemon off;
error_log {prefix}/error.log warn;
pid {prefix}/nginx.pid;
events {{ worker_connections 20000; }}
http {{
    access_log off;
    client_body_temp_path {prefix}/body;
    proxy_temp_path {prefix}/proxy;
    fastcgi_temp_path {prefix}/fastcgi;
    uwsgi_temp_path {prefix}/uwsgi;
    scgi_temp_path {prefix}/scgi;
    keepalive_requests 1000000;
    server {{
        listen 127.0.0.1:{port};
        location / {{
            default_type application/json;
            return 200 '{answer}';
        }}
    }}
}}
"""
INSTANT_ANSWER = (
    '{"id":"chatcmpl-instant","object":"chat.completion","created":1764547200,'
    '"model":"sim-model","choices":[{"index":0,"message":{"role":"assistant",'
    '"content":"A fixed answer from the instant upstream, sixteen tokens or so long."},'
    '"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":16,'
    '"total_tokens":28}}'
)


def ensure_installed() -> str:
    found = shutil.which("nginx") or (
        "/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None
    )
    if found:
        return found
    print(
        "[bench] nginx not found: installing it from Debian (apt-get install nginx-light)",
        flush=True,
    )
    subprocess.run(["apt-get", "update", "-qq"], check=False)
    subprocess.run(
        ["apt-get", "install", "-y", "-qq", "--no-install-recommends", "nginx-light"], check=True
    )
    return shutil.which("nginx") or "/usr/sbin/nginx"


def start_instant_upstream(workdir: Path, port: int, cpu: int | None) -> Proc:
    """nginx answering every request with `INSTANT_ANSWER` on `port`."""
    binary = ensure_installed()
    prefix = workdir / "instant-upstream"
    prefix.mkdir(parents=True, exist_ok=True)
    conf = prefix / "nginx.conf"
    conf.write_text(INSTANT.format(prefix=prefix, port=port, answer=INSTANT_ANSWER))
    return start("instant-upstream", [binary, "-c", str(conf), "-p", str(prefix)], workdir, cpu)


def start_nginx(
    workdir: Path,
    upstream: str,
    port: int,
    cpu: int | None,
    tls: tuple[int, Path, Path] | None = None,
) -> Proc:
    """nginx on `port`; with `tls` = (port, certificate chain, key), HTTPS on that port too."""
    binary = ensure_installed()
    prefix = workdir / "nginx"
    prefix.mkdir(exist_ok=True)
    conf = prefix / "nginx.conf"
    locations = LOCATIONS.format()
    tls_server = ""
    if tls is not None:
        tls_port, cert, key = tls
        tls_server = TLS.format(port=tls_port, cert=cert, key=key, locations=locations)
    conf.write_text(
        CONF.format(
            prefix=prefix, upstream=upstream, port=port, locations=locations, tls=tls_server
        )
    )
    return start("nginx", [binary, "-c", str(conf), "-p", str(prefix)], workdir, cpu)
