"""Alembic environment: always run with a connection handed over by `control.migrations`."""

from __future__ import annotations

from alembic import context

from control.models import metadata

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("run migrations through control.migrations.upgrade(engine)")

# Batch mode lets later migrations alter tables on SQLite (copy-and-move).
context.configure(
    connection=connection,
    target_metadata=metadata,
    render_as_batch=True,
    compare_type=True,
)
with context.begin_transaction():
    context.run_migrations()
