"""Process logging: Python's records (uvicorn's included) and the core's own `tracing` lines go
to one place: standard error, or the file `server.log_file`, which the core owns (`_core`'s
process log: one writer for both sides, reopened on SIGHUP, optionally rotated by size), so the
two never rotate one file apart. No secret is ever passed to a logger."""

from __future__ import annotations

import contextlib
import json
import logging
import sys

from sluicegate import _core

from control.api.errors import StartupError


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": self.formatTime(record),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry)


class ProcessLogHandler(logging.Handler):
    """Each record, formatted, appended to the core's process log file as one write."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            _core.write_process_log(self.format(record) + "\n")
        except Exception:
            self.handleError(record)


def configure_logging(
    level: str, as_json: bool, file: str = "", rotate_bytes: int = 0, rotate_keep: int = 5
) -> None:
    handler: logging.Handler
    if file:
        try:
            _core.init_logging(level, as_json, file, rotate_bytes, rotate_keep)
        except _core.StateError:
            raise StartupError("the process log was set up already in this process") from None
        except _core.LogError as e:
            raise StartupError(str(e)) from None
        handler = ProcessLogHandler()
    else:
        handler = logging.StreamHandler(sys.stderr)
        # Once per process: a second call (tests, a restart in-process) keeps the first set-up.
        with contextlib.suppress(_core.StateError):
            _core.init_logging(level, as_json)
    if as_json:
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers = [handler]
    root.setLevel(level.upper())


def reopen_process_log() -> None:
    """Reopen the process log file under its name (SIGHUP); nothing on standard error."""
    try:
        _core.reopen_process_log()
    except _core.LogError as e:
        logging.getLogger("sluicegate.serve").error("%s; the file in use stays in use", e)
