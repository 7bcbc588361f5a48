"""Errors of the store. All are :class:`fleetdx.probes.errors.FleetdxError`: the CLI prints one line, no traceback."""

from __future__ import annotations

from fleetdx.probes.errors import FleetdxError


class StoreError(FleetdxError):
    """Base of every store error."""


class DatabaseUnreachable(StoreError):
    """The database could not be reached or opened. The message names the URL (password hidden) and the
    driver's own reason, e.g. ``cannot reach database postgresql+psycopg://fleetdx@db:5432/fleetdx:
    connection refused``."""


class SchemaOutdated(StoreError):
    """The database schema is missing or older (or newer) than this fleetdx; ``fleetdx db upgrade`` fixes the
    first two cases."""


class SpoolError(StoreError):
    """A spool file is unreadable or is not a fleetdx spool file."""
