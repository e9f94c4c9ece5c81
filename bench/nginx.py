"""nginx as the baseline proxy: installed from Debian if missing, one worker, keep-alive to the
upstream, no buffering (so streams pass frame by frame)."""

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
        location / {{
            proxy_pass http://sim;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
            proxy_request_buffering off;
            tcp_nodelay on;
        }}
    }}
}}
"""


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


def start_nginx(workdir: Path, upstream: str, port: int, cpu: int | None) -> Proc:
    binary = ensure_installed()
    prefix = workdir / "nginx"
    prefix.mkdir(exist_ok=True)
    conf = prefix / "nginx.conf"
    conf.write_text(CONF.format(prefix=prefix, upstream=upstream, port=port))
    return start("nginx", [binary, "-c", str(conf), "-p", str(prefix)], workdir, cpu)
