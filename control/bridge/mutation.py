"""Every change goes through here: one transaction, the whole snapshot rebuilt from it and applied
to the core before the commit, an audit row in the same transaction. A refused snapshot rolls the
transaction back. One lock serializes changes, so versions only ever go up.

    with ctx.mutator.mutate(caller, subject=("pool", pool_id)) as m:
        m.session.add(...)
        m.record("pool.create", "pool", pool_id, {...})

A mutation that records no change is a no-op: rolled back, no version, nothing pushed.

Changes that touch keys only (create, update, rotate, revoke, a key's quota) say which keys
changed (`m.keys_changed(...)`) and are pushed as key changes on top of the snapshot in force
(`Core.apply_key_changes`): the same version, lock, transaction and audit rules, without
rebuilding the whole snapshot (over a second at 100k keys).

Changes that act on the core outside the snapshot (drills) register how to undo that action with
`m.undo_on_failure(...)`: it runs if the transaction does not commit.

In a fleet (PostgreSQL), every committed mutation also notifies the other replicas inside its
transaction (`control.fleet.channel`); they apply what is committed with `follow()`: the same
version, the whole snapshot rebuilt from their own read of the database.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sluicegate._core import ConfigError, StaleConfigError, StateError
from sqlalchemy.orm import Session, sessionmaker

from control.api.caller import Caller
from control.api.errors import CoreRejected, FieldError
from control.audit.models import AuditEntry
from control.audit.redact import redact
from control.bridge.core_bridge import CoreBridge
from control.bridge.refusal import locate_fault, refusal_of
from control.bridge.snapshot import Snapshot, build_key_changes, with_usage_acked
from control.bridge.state import ControlState, committed_version, lock_state
from control.fleet.channel import announce
from control.timeutil import utcnow

log = logging.getLogger("sluicegate.control")

SnapshotBuilder = Callable[[Session], Snapshot]
KeyChangesBuilder = Callable[[Session, Sequence[str], Sequence[str], datetime | None], Snapshot]


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
    undo: list[Callable[[], None]] = field(default_factory=list)
    # Keys to send again (as they are after the change) or to remove, for a key-only change.
    key_upserts: list[str] = field(default_factory=list)
    key_removals: list[str] = field(default_factory=list)
    # Set when the change went to the core as key changes (not a whole snapshot).
    pushed_as_keys: bool = False

    def keys_changed(self, upsert: Sequence[str] = (), remove: Sequence[str] = ()) -> None:
        self.key_upserts.extend(upsert)
        self.key_removals.extend(remove)

    def undo_on_failure(self, action: Callable[[], None]) -> None:
        """Run `action` if this mutation ends without a commit (an effect outside the database
        that must not outlive a rolled-back change)."""
        self.undo.append(action)

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
        self,
        sessions: sessionmaker[Session],
        bridge: CoreBridge,
        build: SnapshotBuilder,
        build_keys: KeyChangesBuilder = build_key_changes,
        *,
        channel: str | None = None,
    ) -> None:
        self._sessions = sessions
        self._bridge = bridge
        self._build = build
        self._build_keys = build_keys
        self._lock = threading.Lock()
        # The fleet's notification channel (PostgreSQL), or None for a process on its own.
        self._channel = channel
        # When the core's keys were last brought up to date (its snapshot or key changes
        # built): keys that expired since are removed with the next key change.
        self._keys_current_at: datetime | None = None

    @contextmanager
    def mutate(
        self,
        caller: Caller,
        *,
        subject: tuple[str, str] | None = None,
        affects_core: bool = True,
        keys_only: bool = False,
    ) -> Iterator[Mutation]:
        """`keys_only`: the change touches keys only and names them with `m.keys_changed`."""
        with self._lock, self._sessions() as session:
            state = lock_state(session)
            mutation = Mutation(session, caller, subject)
            version: int | None = None
            try:
                yield mutation
                if not mutation.changes:
                    # Nothing changed: no version, no audit row, nothing pushed. The objects read
                    # stay usable (detached as they are, not expired by the rollback).
                    session.expunge_all()
                    session.rollback()
                    return
                session.flush()
                if not affects_core:
                    version = None
                elif keys_only and (mutation.key_upserts or mutation.key_removals):
                    version = self._push_keys(session, state, mutation)
                else:
                    version = self._push(session, state, subject)
                _add_audit_rows(session, mutation, version)
                if self._channel is not None:
                    announce(session, self._channel, _announcement(state.config_version, mutation))
                session.flush()
                session.commit()
            except CoreRejected as rejected:
                session.rollback()
                _undo(mutation)
                self._record_rejection(caller, mutation, rejected)
                raise
            except BaseException:
                session.rollback()
                _undo(mutation)
                if version is not None:
                    # The core runs what the database failed to keep: put it back in step.
                    log.exception("the change failed after the core acknowledged; resynchronizing")
                    try:
                        self._resync_locked()
                    except Exception:
                        log.exception("resynchronizing the data plane failed; the next change will")
                raise

    def snapshot(self, session: Session) -> Snapshot:
        """The snapshot the database holds now (what the next apply would push)."""
        return self._build(session)

    def _push(self, session: Session, state: ControlState, subject: tuple[str, str] | None) -> int:
        """Apply the snapshot this transaction holds under the next version; returns it.
        A refusal becomes `CoreRejected` naming the request field at fault."""
        version = state.config_version + 1
        # Read before the ledger's figures: every event up to it is in them.
        acked = self._bridge.usage_acked()
        snapshot = self._build(session)
        payload = with_usage_acked(snapshot.payload, acked)
        try:
            self._bridge.apply(version, payload)
        except StaleConfigError:
            # The core runs a version the database never committed (a commit failed after the
            # ACK, and so did the resync that followed): move past it and push again.
            core_version = self._bridge.core_version or 0
            log.warning(
                "the data plane runs config version %d, the database %d: resynchronizing",
                core_version,
                state.config_version,
            )
            version = max(version, core_version) + 1
            try:
                self._bridge.apply(version, payload)
            except ConfigError as e:
                raise core_rejection(e, snapshot, subject) from None
        except ConfigError as e:
            raise core_rejection(e, snapshot, subject) from None
        state.config_version = version
        self._keys_current_at = snapshot.at
        return version

    def _push_keys(self, session: Session, state: ControlState, mutation: Mutation) -> int:
        """Apply the mutation's key changes under the next version; returns it."""
        version = state.config_version + 1
        acked = self._bridge.usage_acked()
        changes = self._build_keys(
            session, mutation.key_upserts, mutation.key_removals, self._keys_current_at
        )
        try:
            self._bridge.apply_keys(version, with_usage_acked(changes.payload, acked))
        except (StaleConfigError, StateError):
            # The core runs a version the database never committed, or no snapshot at all: a
            # whole snapshot puts it back in step.
            return self._push(session, state, mutation.subject)
        except ConfigError as e:
            raise core_rejection(e, changes, mutation.subject) from None
        state.config_version = version
        self._keys_current_at = changes.at
        mutation.pushed_as_keys = True
        return version

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

    def follow(self, keys: KeyHint | None = None) -> int | None:
        """Apply what the database committed, if the core runs an older version (another replica
        committed it). The database is read in one repeatable-read transaction, so what is built
        is the state of one version: the key changes of `keys` when they lead from the core's
        version to the committed one, else the whole snapshot. Returns the version applied, or
        None if the core was in step. A refusal (a committed version this core cannot run, e.g.
        during a rolling upgrade) leaves the last good snapshot in force and is raised as
        `CoreRejected`."""
        with self._lock, self._sessions() as session:
            if session.get_bind().dialect.name == "postgresql":
                session.connection(execution_options={"isolation_level": "REPEATABLE READ"})
            version = committed_version(session)
            current = self._bridge.core_version or 0
            if version <= current:
                return None
            # Read before the ledger's figures: every event up to it is in them.
            acked = self._bridge.usage_acked()
            if keys is not None and keys.version == version and current == version - 1:
                changes = self._build_keys(session, keys.upsert, keys.remove, self._keys_current_at)
                try:
                    self._bridge.apply_keys(version, with_usage_acked(changes.payload, acked))
                    self._keys_current_at = changes.at
                    return version
                except (ConfigError, StateError):
                    pass  # a whole snapshot settles it
            snapshot = self._build(session)
            try:
                self._bridge.apply(version, with_usage_acked(snapshot.payload, acked))
            except StaleConfigError:
                return None  # this replica moved past it meanwhile
            except ConfigError as e:
                raise core_rejection(e, snapshot, None) from None
            self._keys_current_at = snapshot.at
            return version

    def apply_current(self) -> int:
        """Build the snapshot of what is committed and apply it under a new version (at start)."""
        with self._lock:
            return self._resync_locked()

    def _resync_locked(self) -> int:
        with self._sessions() as session:
            state = lock_state(session)
            state.config_version = max(state.config_version, self._bridge.core_version or 0)
            version = self._push(session, state, None)
            if self._channel is not None:
                announce(session, self._channel, {"version": version})
            session.commit()
            return version


@dataclass(frozen=True)
class KeyHint:
    """What a key-only change committed as `version` changed, as its notification says."""

    version: int
    upsert: list[str]
    remove: list[str]


# A notification's payload must stay under PostgreSQL's 8000 bytes: past this many ids, the
# other replicas rebuild the whole snapshot instead.
HINT_MAX_KEYS = 150


def _announcement(version: int, mutation: Mutation) -> dict[str, Any]:
    """What the other replicas are told of a committed change: its version, and for a key-only
    change the keys (so they can apply it as key changes too)."""
    ids = len(mutation.key_upserts) + len(mutation.key_removals)
    if not mutation.pushed_as_keys or ids > HINT_MAX_KEYS:
        return {"version": version}
    return {"version": version, "upsert": mutation.key_upserts, "remove": mutation.key_removals}


def key_hint(payload: dict[str, Any]) -> KeyHint | None:
    """The key changes a notification describes, if it describes some."""
    upsert, remove = payload.get("upsert"), payload.get("remove")
    version = payload.get("version")
    if not isinstance(version, int) or not isinstance(upsert, list) or not isinstance(remove, list):
        return None
    if not all(isinstance(i, str) for i in (*upsert, *remove)):
        return None
    return KeyHint(version, upsert, remove)


def _undo(mutation: Mutation) -> None:
    for action in reversed(mutation.undo):
        try:
            action()
        except Exception:
            log.exception("could not undo an effect of a rolled-back change")


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


def core_rejection(
    error: ConfigError, snapshot: Snapshot, subject: tuple[str, str] | None
) -> CoreRejected:
    refusal = refusal_of(error)
    fault = (
        None
        if refusal.detail is None
        else locate_fault(refusal.path, refusal.detail, snapshot.index)
    )
    if fault is None:
        return CoreRejected(f"the data plane refused the change: {refusal.message}")
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
