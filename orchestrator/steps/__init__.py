"""Step-time decomposition of a slow job across ranks: the stalling stage, rank-local or global.

Data flows one way through the modules: :mod:`.load` (files -> parsed traces and StepTimer logs) ->
:mod:`.decompose` (one rank -> stages, GPU view, kernel and op statistics; uses :mod:`.intervals`) ->
:mod:`.analyze` (all ranks -> summaries and STEP_* findings) -> :mod:`.run` (a whole ``fleetdx steps`` analysis:
parallel loading, baseline comparison, store history). Contracts in :mod:`.contracts`.
"""
