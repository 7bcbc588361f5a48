"""``python -m fleetdx``: the same command line as the ``fleetdx`` script."""

from fleetdx.orchestrator.cli.main import main

if __name__ == "__main__":
    main()
