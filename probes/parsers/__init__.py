"""Pure parsers: text in, pydantic model out, no I/O. Each raises only :class:`fleetdx.probes.errors.ParseError`."""
