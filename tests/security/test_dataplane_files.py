"""What the data plane writes about tenants (usage journal, access log) is readable by the owner
only, and a journal directory left too open is narrowed when it is opened."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from sluicegate import _core


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_journal_and_access_log_are_the_owners_only(tmp_path: Path) -> None:
    old_umask = os.umask(0o022)
    try:
        journal = tmp_path / "journal"
        journal.mkdir(mode=0o755)
        journal.chmod(0o755)
        log = tmp_path / "access.log"
        core = _core.Core(workers=1, journal_dir=journal, access_log=str(log))
        try:
            assert _mode(journal) == 0o700
            files = [p for p in journal.iterdir() if p.is_file()]
            assert files
            assert all(_mode(p) == 0o600 for p in files), {p.name: oct(_mode(p)) for p in files}
            assert _mode(log) == 0o600
        finally:
            core.stop(0)
    finally:
        os.umask(old_umask)
