"""Process logging: one handler on stderr for Python (and uvicorn), the core's own `tracing`
output beside it. No secret is ever passed to a logger."""

from __future__ import annotations

import contextlib
import json
import logging
import sys

from sluicegate import _core


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


def configure_logging(level: str, as_json: bool) -> None:
    handler = logging.StreamHandler(sys.stderr)
    if as_json:
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers = [handler]
    root.setLevel(level.upper())
    # Once per process: a second call (tests, a restart in-process) keeps the first set-up.
    with contextlib.suppress(_core.StateError):
        _core.init_logging(level, as_json)
