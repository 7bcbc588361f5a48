"""``from fleetdx.steps import StepTimer``: the step timer for training loops (standard library, optional torch).

A thin re-export of :mod:`fleetdx.probes.steptimer` under a short, stable name; see there for the details.
"""

from fleetdx.probes.steptimer import SCHEMA, STAGES, StepTimer

__all__ = ["SCHEMA", "STAGES", "StepTimer"]
