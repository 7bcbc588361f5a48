"""The ``fleetdx`` command line (typer + rich). Only this package calls ``sys.exit``."""
