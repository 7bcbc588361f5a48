"""Alembic environment of the fleetdx store.

fleetdx drives Alembic programmatically (:mod:`fleetdx.orchestrator.store.migrate`): the caller puts an open
``Connection`` in ``config.attributes["connection"]``; there is no alembic.ini and no offline mode.
"""

from __future__ import annotations

from alembic import context

from fleetdx.orchestrator.store.models import Base

config = context.config
connection = config.attributes.get("connection")
if connection is None:  # pragma: no cover - only reachable when someone runs the alembic CLI by hand
    raise RuntimeError("run fleetdx's migrations through `fleetdx db upgrade`, not the alembic CLI")

context.configure(
    connection=connection,
    target_metadata=Base.metadata,
    render_as_batch=connection.dialect.name == "sqlite",  # SQLite ALTER TABLE goes through batch mode
    compare_type=True,
)
with context.begin_transaction():
    context.run_migrations()
