"""`sluicegate serve` keeps its files to itself: the SQLite file (the pepper, every hash), its
WAL and shared memory, the encryption key, the usage journal (every tenant's usage) and the
access log.

The process's umask is 0o077 from its first instruction, so everything it creates, the core's
journal and access log included, is 0600 (directories 0700). Files an older release left
readable are tightened at start, each with a log line. Only files and directories `serve` owns
are touched: never the directory a database or log file sits in.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from sqlalchemy.engine import make_url

from control.api.errors import StartupError
from control.process.secrets_setup import default_key_file
from control.process.settings import Settings, journal_dir

log = logging.getLogger("sluicegate.serve")

UMASK = 0o077


def restrict_umask() -> None:
    os.umask(UMASK)


def _owned_files(settings: Settings) -> Iterator[Path]:
    url = make_url(settings.database.url)
    if url.get_backend_name() == "sqlite" and url.database:
        database = Path(url.database)
        yield from (database, Path(f"{database}-wal"), Path(f"{database}-shm"))
    key_file = settings.secrets.encryption_key_file or default_key_file(settings)
    if key_file is not None:
        yield key_file
    access_log = settings.server.access_log
    if access_log and access_log != "-":
        yield Path(access_log)


def _tighten(path: Path) -> None:
    try:
        info = path.stat()
    except FileNotFoundError:
        return
    mode = stat.S_IMODE(info.st_mode)
    private = mode & 0o700
    if mode != private and (stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode)):
        try:
            path.chmod(private)
        except OSError as e:
            raise StartupError(
                f"{path} is readable by others (mode {mode:04o}) and cannot be restricted: "
                f"{e.strerror}"
            ) from None
        log.warning("restricted %s: mode %04o -> %04o", path, mode, private)


def tighten_existing(settings: Settings) -> None:
    """Take group and other permissions off what `serve` owns and an older release created."""
    for path in _owned_files(settings):
        _tighten(path)
    journal = journal_dir(settings)
    if journal.is_dir():
        _tighten(journal)
        for entry in journal.iterdir():
            _tighten(entry)
