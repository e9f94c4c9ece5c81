"""Every change goes through here: one transaction, the whole snapshot rebuilt from it and applied
to the core before the commit, an audit row in the same transaction. A refused snapshot rolls the
transaction back. One lock serializes changes, so versions only ever go up.

    with ctx.mutator.mutate(caller, subject=("pool", pool_id)) as m:
        m.session.add(...)
        m.record("pool.create", "pool", pool_id, {...})

A mutation that records no change is a no-op: rolled back, no version, nothing pushed.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from sluicegate._core import ConfigError
from sqlalchemy.orm import Session, sessionmaker

from control.audit.models import AuditEntry
from control.audit.redact import redact
from control.caller import Caller
from control.core_bridge import CoreBridge
from control.errors import CoreRejected, FieldError
from control.snapshot import Snapshot, locate_fault
from control.state import lock_state
from control.timeutil import utcnow

log = logging.getLogger("sluicegate.control")

SnapshotBuilder = Callable[[Session], Snapshot]


@dataclass
class Change:
    action: str
    resource_type: str
    resource_id: str
    summary: dict[str, Any]
    tenant_id: str | None


@dataclass
class Mutation:
    session: Session
    caller: Caller
    # The resource being changed, to say which request field the core refused.
    subject: tuple[str, str] | None
    changes: list[Change] = field(default_factory=list)

    def record(
        self,
        action: str,
        resource_type: str,
        resource_id: str,
        summary: dict[str, Any],
        tenant_id: str | None = None,
    ) -> None:
        self.changes.append(Change(action, resource_type, resource_id, summary, tenant_id))


class Mutator:
    def __init__(
        self, sessions: sessionmaker[Session], bridge: CoreBridge, build: SnapshotBuilder
    ) -> None:
        self._sessions = sessions
        self._bridge = bridge
        self._build = build
        self._lock = threading.Lock()

    @contextmanager
    def mutate(
        self,
        caller: Caller,
        *,
        subject: tuple[str, str] | None = None,
        affects_core: bool = True,
    ) -> Iterator[Mutation]:
        with self._lock, self._sessions() as session:
            state = lock_state(session)
            mutation = Mutation(session, caller, subject)
            try:
                yield mutation
                if not mutation.changes:
                    # Nothing changed: no version, no audit row, nothing pushed. The objects read
                    # stay usable (detached as they are, not expired by the rollback).
                    session.expunge_all()
                    session.rollback()
                    return
                session.flush()
                version = None
                if affects_core:
                    version = state.config_version + 1
                    state.config_version = version
                _add_audit_rows(session, mutation, version)
                session.flush()
                if version is not None:
                    self._apply(session, version, subject)
            except CoreRejected as rejected:
                session.rollback()
                self._record_rejection(caller, mutation, rejected)
                raise
            except BaseException:
                session.rollback()
                raise
            try:
                session.commit()
            except Exception:
                # The core runs what the database failed to keep: put it back in step.
                log.exception("commit failed after the core acknowledged; resynchronizing")
                session.rollback()
                self._resync_locked()
                raise

    def snapshot(self, session: Session) -> Snapshot:
        """The snapshot the database holds now (what the next apply would push)."""
        return self._build(session)

    def _apply(self, session: Session, version: int, subject: tuple[str, str] | None) -> None:
        snapshot = self._build(session)
        try:
            self._bridge.apply(version, snapshot.payload)
        except ConfigError as e:
            raise _rejection(str(e), snapshot, subject) from None

    def _record_rejection(self, caller: Caller, mutation: Mutation, rejected: CoreRejected) -> None:
        """The refused change leaves a trace in the audit log, in a transaction of its own."""
        attempted = [f"{c.action} {c.resource_type}:{c.resource_id}" for c in mutation.changes]
        refused = Mutation(mutation.session, caller, mutation.subject)
        kind, ident = mutation.subject or ("config", "-")
        refused.record(
            "config.rejected", kind, ident, {"attempted": attempted, "message": rejected.message}
        )
        try:
            with self._sessions() as session:
                _add_audit_rows(session, refused, None)
                session.commit()
        except Exception:
            log.exception("could not record a refused change in the audit log")

    def apply_current(self) -> int:
        """Build the snapshot of what is committed and apply it under a new version (at start)."""
        with self._lock:
            return self._resync_locked()

    def _resync_locked(self) -> int:
        with self._sessions() as session:
            state = lock_state(session)
            version = max(state.config_version, self._bridge.core_version or 0) + 1
            state.config_version = version
            session.flush()
            snapshot = self._build(session)
            try:
                self._bridge.apply(version, snapshot.payload)
            except ConfigError as e:
                session.rollback()
                raise _rejection(str(e), snapshot, None) from None
            session.commit()
            return version


def _add_audit_rows(session: Session, mutation: Mutation, version: int | None) -> None:
    now = utcnow()
    for change in mutation.changes:
        session.add(
            AuditEntry(
                at=now,
                actor_id=mutation.caller.token_id,
                actor_name=mutation.caller.name,
                actor_role=mutation.caller.role,
                action=change.action,
                resource_type=change.resource_type,
                resource_id=change.resource_id,
                tenant_id=change.tenant_id,
                summary=redact(change.summary),
                config_version=version,
            )
        )


def _rejection(message: str, snapshot: Snapshot, subject: tuple[str, str] | None) -> CoreRejected:
    fault = locate_fault(message, snapshot.index)
    if fault is None:
        return CoreRejected(f"the data plane refused the change: {message}")
    where = f"{fault.resource_type} {fault.resource_id!r}"
    text = f"the data plane refused the change: {where}: {fault.field}: {fault.message}"
    if subject == (fault.resource_type, fault.resource_id):
        name = fault.field
    elif subject is not None and subject == ("provider", fault.provider_id):
        # A provider's base URL or credential as the member of some pool carries it.
        name = fault.field.split(".", 1)[-1]
    else:
        name = f"{fault.resource_type}:{fault.resource_id}.{fault.field}"
    return CoreRejected(text, [FieldError(name, fault.message)])
