"""The admin API over HTTP: the one client every command uses, and the one way its failures
become a message for the operator.

An error answer becomes `ApiError` in the API's own words (`HTTP 422 validation_error: ...` and
a line per field at fault); a network failure becomes `Unreachable`. Both are `CliError`s, which
`run` prints as `sluicegate COMMAND: message` on stderr and turns into the exit code: 1 for the
API and the network, 2 for the command line.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Callable
from typing import IO, Any, ClassVar

import httpx

DEFAULT_ADMIN_URL = "http://127.0.0.1:8081"
TOKEN_ENV = "SLUICEGATE_ADMIN_TOKEN"


class CliError(Exception):
    """A message for the operator; the command exits with `code`."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


class ApiError(CliError):
    """The admin API answered with an error."""


class Unreachable(CliError):
    """The admin API could not be reached, or the answer was cut short."""


def error_text(response: httpx.Response) -> str:
    """An error answer in the API's words: `HTTP 422 code: message` and a line per field."""
    try:
        error = response.json()["error"]
        lines = [f"HTTP {response.status_code} {error['code']}: {error['message']}"]
        lines += [f"  {f['field']}: {f['message']}" for f in error.get("fields", [])]
        return "\n".join(lines)
    except (ValueError, KeyError, TypeError):
        return f"HTTP {response.status_code}: {response.text[:200]}"


class AdminClient:
    """The admin API with a bearer token."""

    # Where requests go instead of the network: tests route the CLI to an in-process app.
    transport: ClassVar[httpx.BaseTransport | None] = None

    def __init__(self, url: str, token: str, timeout: float = 30.0) -> None:
        self.url = url.rstrip("/")
        self._http = httpx.Client(
            base_url=self.url,
            headers={"Authorization": f"Bearer {token}"},
            timeout=timeout,
            transport=self.transport,
        )

    def __enter__(self) -> AdminClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _unreachable(self, error: Exception) -> Unreachable:
        return Unreachable(f"cannot reach the admin API at {self.url}: {error}")

    def call(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None = None,
        params: dict[str, Any] | None = None,
    ) -> Any:
        """The answer's JSON (None for 204 No Content)."""
        try:
            response = self._http.request(method, path, json=body, params=params)
        except httpx.HTTPError as e:
            raise self._unreachable(e) from None
        if response.status_code >= 400:
            raise ApiError(error_text(response))
        if response.status_code == 204:
            return None
        try:
            return response.json()
        except ValueError:
            raise ApiError(f"HTTP {response.status_code}: the answer is not JSON") from None

    def download(self, path: str, params: dict[str, Any], target: str | None) -> None:
        """Stream an answer to stdout or to `target` (written to TARGET.part and renamed when
        complete: a failed download never leaves a file that looks whole)."""
        partial = f"{target}.part" if target else None
        receiving = False
        try:
            with self._http.stream("GET", path, params=params) as response:
                if response.status_code >= 400:
                    response.read()
                    raise ApiError(error_text(response))
                receiving = True
                out: IO[bytes]
                with (
                    open(partial, "wb") if partial else contextlib.nullcontext(sys.stdout.buffer)
                ) as out:
                    for chunk in response.iter_bytes():
                        out.write(chunk)
                    out.flush()
            if partial and target:
                os.replace(partial, target)
        except (httpx.HTTPError, OSError) as e:
            if isinstance(e, OSError):
                raise CliError(f"cannot write {target or 'stdout'}: {e}") from None
            if receiving:
                raise Unreachable(f"the download was cut short: {e}") from None
            raise self._unreachable(e) from None
        finally:
            if partial and os.path.exists(partial):
                with contextlib.suppress(OSError):
                    os.remove(partial)


def token_of(args: argparse.Namespace) -> str:
    token: str | None = args.token or os.environ.get(TOKEN_ENV)
    if not token:
        raise CliError(f"no admin token: set {TOKEN_ENV} or pass --token", code=2)
    return token


def run(args: argparse.Namespace, body: Callable[[AdminClient], int], timeout: float = 30.0) -> int:
    """`body` with a client for the command's admin URL and token; a `CliError` is printed as
    `sluicegate COMMAND: message` and becomes the exit code."""
    name = " ".join(filter(None, (args.command, getattr(args, "action", None))))
    try:
        with AdminClient(args.admin_url, token_of(args), timeout) as client:
            return body(client)
    except CliError as e:
        print(f"sluicegate {name}: {e}", file=sys.stderr)
        return e.code
