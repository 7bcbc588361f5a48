"""Step-time decomposition of a slow job across ranks: the stalling stage, rank-local or global."""
