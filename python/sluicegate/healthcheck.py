"""`python -m sluicegate.healthcheck`: the image's HEALTHCHECK. Exit 0 while the data plane's
`GET /readyz` answers 200 at `SLUICEGATE_DATA_LISTEN` (a wildcard address is probed on the
loopback), 1 otherwise, with the reason on stderr. With `SLUICEGATE_TLS_CERT_FILE` set the data
port speaks TLS, and so does the probe (without checking the certificate: it asks a loopback
listener whether it is ready, not who it is; the name it would check is not on the certificate).

Light on purpose: it runs every few seconds beside the gateway, so it reads only the environment
(not the settings file) and imports only the address parser `serve` uses."""

from __future__ import annotations

import http.client
import os
import ssl
import sys

from control.process.listen import HostPort

DEFAULT_DATA_LISTEN = "0.0.0.0:8080"
WILDCARDS = {"0.0.0.0": "127.0.0.1", "::": "::1"}


def probe(listen: str, timeout: float = 2.0, tls: bool = False) -> str | None:
    """None when ready, else why not."""
    try:
        where = HostPort.parse(listen)
    except ValueError as e:
        return f"SLUICEGATE_DATA_LISTEN={listen!r}: {e}"
    host = WILDCARDS.get(where.host, where.host)
    conn: http.client.HTTPConnection
    if tls:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        conn = http.client.HTTPSConnection(host, where.port, timeout=timeout, context=context)
    else:
        conn = http.client.HTTPConnection(host, where.port, timeout=timeout)
    try:
        conn.request("GET", "/readyz")
        answer = conn.getresponse()
        body = answer.read(512).decode("utf-8", "replace")
    except (OSError, http.client.HTTPException) as e:
        return f"{HostPort(host, where.port)}: {e or type(e).__name__}"
    finally:
        conn.close()
    return None if answer.status == 200 else f"/readyz answered {answer.status}: {body}"


def main() -> int:
    problem = probe(
        os.environ.get("SLUICEGATE_DATA_LISTEN", DEFAULT_DATA_LISTEN),
        tls=bool(os.environ.get("SLUICEGATE_TLS_CERT_FILE")),
    )
    if problem is not None:
        print(f"sluicegate healthcheck: {problem}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
