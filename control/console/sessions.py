"""Console sessions, held in the serving process's memory.

A session holds the admin token it was opened with and nothing the browser sees but a random
id (in an HttpOnly cookie). Every page the session asks for is fetched from the admin API with
that token, so the session is never looser than the token: a revoked or expired token, or a
disabled tenant, is refused by the API and the console then ends every session of that token.

Only the SHA-256 of a session id is kept (a look-up by the cookie's value cannot leak ids by
timing), and each session's CSRF token is compared in constant time. Sessions end after
`idle_seconds` without use, `max_age_seconds` after sign-in, at the token's own `expires_at`,
at sign-out, and past the caps (the oldest first). The clock is injected: tests move it.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from control.console.settings import ConsoleSettings


def _digest(session_id: str) -> str:
    return hashlib.sha256(session_id.encode()).hexdigest()


@dataclass(frozen=True)
class Identity:
    """Who the token is, as the admin API's `GET /v1/admin/whoami` said at sign-in."""

    token_id: str
    name: str
    role: str
    tenant_id: str | None
    # Unix seconds of the token's own expiry, if it has one.
    token_expires: float | None = None

    @property
    def is_admin(self) -> bool:
        return self.role == "admin"


@dataclass
class Session:
    identity: Identity
    token: str
    csrf: str
    created: float
    last_seen: float
    # Form nonces already used (a reloaded "create" page must not create a second key).
    used_nonces: set[str] = field(default_factory=set)

    def csrf_matches(self, sent: str | None) -> bool:
        return sent is not None and hmac.compare_digest(sent.encode(), self.csrf.encode())

    def use_nonce(self, nonce: str) -> bool:
        """True the first time a form's nonce is seen."""
        if not nonce or nonce in self.used_nonces:
            return False
        if len(self.used_nonces) >= 1000:
            self.used_nonces.clear()
        self.used_nonces.add(nonce)
        return True


class SessionStore:
    def __init__(self, settings: ConsoleSettings, clock: Callable[[], float] = time.time) -> None:
        self.settings = settings
        self.clock = clock
        self._lock = threading.Lock()
        # Insertion order is creation order: the oldest session is the first.
        self._sessions: OrderedDict[str, Session] = OrderedDict()

    def create(self, identity: Identity, token: str) -> tuple[str, Session]:
        """A new session; returns the id for the cookie (never stored) and the session."""
        session_id = secrets.token_urlsafe(32)
        now = self.clock()
        session = Session(identity, token, secrets.token_urlsafe(32), now, now)
        with self._lock:
            self._expire(now)
            mine = [
                k for k, s in self._sessions.items() if s.identity.token_id == identity.token_id
            ]
            for key in mine[: max(0, len(mine) - self.settings.max_sessions_per_token + 1)]:
                del self._sessions[key]
            while len(self._sessions) >= self.settings.max_sessions:
                self._sessions.popitem(last=False)
            self._sessions[_digest(session_id)] = session
        return session_id, session

    def get(self, session_id: str | None) -> Session | None:
        """The live session of a cookie's value (its use recorded), or None."""
        if not session_id:
            return None
        key = _digest(session_id)
        now = self.clock()
        with self._lock:
            session = self._sessions.get(key)
            if session is None:
                return None
            if not self._alive(session, now):
                del self._sessions[key]
                return None
            session.last_seen = now
            return session

    def end(self, session_id: str | None) -> None:
        if session_id:
            with self._lock:
                self._sessions.pop(_digest(session_id), None)

    def end_token(self, token_id: str) -> int:
        """End every session of a token (revoked, expired, or its tenant disabled)."""
        with self._lock:
            keys = [k for k, s in self._sessions.items() if s.identity.token_id == token_id]
            for key in keys:
                del self._sessions[key]
        return len(keys)

    def __len__(self) -> int:
        with self._lock:
            return len(self._sessions)

    def _alive(self, session: Session, now: float) -> bool:
        expires = session.identity.token_expires
        return (
            now - session.last_seen < self.settings.idle_seconds
            and now - session.created < self.settings.max_age_seconds
            and (expires is None or now < expires)
        )

    def _expire(self, now: float) -> None:
        dead = [k for k, s in self._sessions.items() if not self._alive(s, now)]
        for key in dead:
            del self._sessions[key]
