"""Console sessions on a fake clock: idle and absolute expiry, the token's own expiry, the caps,
and ending every session of a token."""

from __future__ import annotations

from control.console.sessions import Identity, SessionStore
from control.console.settings import ConsoleSettings


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def identity(token_id: str = "tok1", expires: float | None = None) -> Identity:
    return Identity(token_id, "ops", "admin", None, expires)


def store(clock: Clock, **settings: int) -> SessionStore:
    return SessionStore(ConsoleSettings(**settings), clock=clock)  # type: ignore[arg-type]


def test_a_session_lives_while_used_and_ends_when_idle() -> None:
    clock = Clock()
    sessions = store(clock, idle_seconds=600, max_age_seconds=3600)
    sid, _ = sessions.create(identity(), "secret")
    clock.now += 590
    assert sessions.get(sid) is not None  # use moves the idle deadline
    clock.now += 590
    assert sessions.get(sid) is not None
    clock.now += 600
    assert sessions.get(sid) is None
    assert len(sessions) == 0


def test_a_session_ends_at_its_max_age_however_used() -> None:
    clock = Clock()
    sessions = store(clock, idle_seconds=600, max_age_seconds=1200)
    sid, _ = sessions.create(identity(), "secret")
    for _ in range(3):
        clock.now += 399
        assert sessions.get(sid) is not None
    clock.now += 5
    assert sessions.get(sid) is None


def test_a_session_ends_when_its_token_expires() -> None:
    clock = Clock()
    sessions = store(clock)
    sid, _ = sessions.create(identity(expires=clock.now + 60), "secret")
    clock.now += 59
    assert sessions.get(sid) is not None
    clock.now += 1
    assert sessions.get(sid) is None


def test_unknown_ids_and_ended_sessions_find_nothing() -> None:
    clock = Clock()
    sessions = store(clock)
    sid, session = sessions.create(identity(), "secret")
    assert sessions.get("") is None and sessions.get(None) is None
    assert sessions.get(sid + "x") is None
    assert session.csrf_matches(session.csrf) and not session.csrf_matches(session.csrf + "x")
    assert not session.csrf_matches(None)
    sessions.end(sid)
    assert sessions.get(sid) is None


def test_ending_a_token_ends_all_its_sessions_only() -> None:
    clock = Clock()
    sessions = store(clock)
    mine = [sessions.create(identity("a"), "sa")[0] for _ in range(3)]
    other, _ = sessions.create(identity("b"), "sb")
    assert sessions.end_token("a") == 3
    assert all(sessions.get(s) is None for s in mine)
    assert sessions.get(other) is not None


def test_caps_drop_the_oldest_sessions() -> None:
    clock = Clock()
    sessions = store(clock, max_sessions=3, max_sessions_per_token=2)
    first, _ = sessions.create(identity("a"), "sa")
    second, _ = sessions.create(identity("a"), "sa")
    third, _ = sessions.create(identity("a"), "sa")
    assert sessions.get(first) is None  # past the per-token cap
    assert sessions.get(second) is not None and sessions.get(third) is not None
    b1, _ = sessions.create(identity("b"), "sb")
    b2, _ = sessions.create(identity("c"), "sc")
    assert len(sessions) == 3
    assert sessions.get(second) is None  # the oldest overall
    assert sessions.get(b1) is not None and sessions.get(b2) is not None


def test_a_form_nonce_is_used_once() -> None:
    sessions = store(Clock())
    _, session = sessions.create(identity(), "secret")
    assert session.use_nonce("n1")
    assert not session.use_nonce("n1")
    assert not session.use_nonce("")
