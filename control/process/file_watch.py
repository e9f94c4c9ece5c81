"""Whether a set of files changed, judged from their identity (device, inode, size, mtime, read
through symlinks as certbot's `live/` names are) without reading them. A change counts once the
files have stood still for one check: an ACME client writes the chain and then the key, and a
reload between the two would refuse a pair that is only half new. The data plane's watch
(`proxy_core/src/tls/watch.rs`) follows the same rule."""

from __future__ import annotations

import os
from pathlib import Path

Stamp = tuple[int, int, int, int] | None


def _stamp(path: Path) -> Stamp:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


class FileWatch:
    def __init__(self, paths: list[Path]) -> None:
        self._paths = paths
        self._settled = self._stamps()
        self._moving: tuple[Stamp, ...] | None = None

    def _stamps(self) -> tuple[Stamp, ...]:
        return tuple(_stamp(p) for p in self._paths)

    def changed(self) -> bool:
        """One check: True once when the files changed and then stood still."""
        now = self._stamps()
        if now == self._settled:
            self._moving = None
            return False
        if now == self._moving:
            self._settled, self._moving = now, None
            return True
        self._moving = now
        return False
