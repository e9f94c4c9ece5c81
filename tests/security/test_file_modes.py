"""`sluicegate serve` creates its files 0600 and its directories 0700 (the SQLite file holds the
pepper and the hashes, the journal the usage of every tenant), and tightens files an older
release left readable, saying so in its log."""

from __future__ import annotations

import sqlite3
import stat
from pathlib import Path

import pytest

from tests.e2e.helpers import start_serve


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_serve_keeps_its_files_to_itself(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # What an older release left behind: a database (with its WAL) and an access log, 0644.
    database = tmp_path / "sluicegate.db"
    with sqlite3.connect(database) as conn:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("CREATE TABLE leftover (x)")
    access_log = tmp_path / "access.log"
    access_log.write_text("")
    for path in (database, access_log):
        path.chmod(0o644)
    journal = tmp_path / "sluicegate.db.usage-journal"
    journal.mkdir(mode=0o755)
    journal.chmod(0o755)

    monkeypatch.setenv("SLUICEGATE_ACCESS_LOG", str(access_log))
    proc, _, _ = start_serve(tmp_path)
    try:
        created = [
            database,
            access_log,
            tmp_path / "sluicegate.db-wal",
            tmp_path / "sluicegate.db-shm",
        ]
        for path in created:
            assert path.exists(), path
            assert _mode(path) == 0o600, (path, oct(_mode(path)))
        assert _mode(journal) == 0o700, oct(_mode(journal))
        journal_files = [p for p in journal.iterdir() if p.is_file()]
        assert journal_files
        for path in journal_files:
            assert _mode(path) == 0o600, (path, oct(_mode(path)))
        log = proc.log.read_text()
        assert "sluicegate.db: mode 0644 -> 0600" in log, log
        assert "access.log: mode 0644 -> 0600" in log
        assert "sluicegate.db.usage-journal: mode 0755 -> 0700" in log
    finally:
        proc.stop()
