"""Robust statistics shared by the bandwidth detection (:mod:`fleetdx.orchestrator.preflight.detection`) and the
step-time analysis (:mod:`fleetdx.orchestrator.steps`): a median/MAD baseline on the log scale and the thresholds
that judge a value against it. Pure. Moved here from ``preflight/detection.py`` (which re-exports them) so that
a lower layer can use them; see that module's docstring for the method and its sources.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from typing import TYPE_CHECKING

from pydantic import Field

from fleetdx.probes.contracts import Contract

if TYPE_CHECKING:
    from fleetdx.orchestrator.report import CurveBackend

#: 1 / Phi^-1(3/4): makes the MAD a consistent estimator of the standard deviation under normal noise
MAD_TO_SIGMA = 1.4826


class DetectionPolicy(Contract):
    """Thresholds of the detector. Defaults suit NCCL over a real fabric; :meth:`for_backend` gives gloo's."""

    z_threshold: float = 3.5  #: modified z-score cut (Iglewicz & Hoaglin 1993)
    min_drop: float = Field(default=0.035, ge=0, lt=1)  #: smallest relative drop below the baseline ever flagged
    noise_floor: float = Field(default=0.01, gt=0)  #: floor of the log-scale spread: the backend's relative noise
    reference_ratio: float = 0.9  #: low when below this x the SKU reference (nccl-tests NCCL_TESTS_MIN_BW)
    critical_ratio: float = 0.5  #: NCCL_BUSBW_LOW is critical below this x the expected figure
    #: net agreeing evidence to condemn a node: attributable low measurements minus normal ones (3: three
    #: measurements with cleared partners, none contradicted); a sequential test in the spirit of Wald's SPRT
    confirmations: int = Field(default=3, ge=1)
    min_nodes_for_screen: int = 8  #: below this N one round of pairs is too few for a median: use round-robin

    @classmethod
    def for_backend(cls, backend: CurveBackend) -> DetectionPolicy:
        """Gloo on CPUs varies by about +-50% run to run (measured, see bench/MEASUREMENTS.md): only flag halvings
        (min_drop 0.5; with the scale floored at 15% of the median the z cut alone needs a 52.5% drop)."""
        # the report's models load here, not with this module: fleetdx steps uses the statistics alone
        from fleetdx.orchestrator.report import CurveBackend

        if backend is CurveBackend.GLOO:
            return cls(min_drop=0.5, noise_floor=0.15)
        return cls()


class Baseline(Contract):
    """A robust centre and scale of a set of busbw values (GB/s), taken on the log scale.

    Bandwidth effects are ratios (a node at 80% of its peers) and its noise is multiplicative, so the median
    and MAD are those of ``ln(busbw)``: the z-score then treats 0.5x and 2x symmetrically, and a few pairs
    with +-50% gloo noise do not inflate the scale the way they do on the linear scale. (Nonparametric
    statistics for performance data: Hoefler & Belli, "Scientific Benchmarking of Parallel Computing Systems",
    SC 2015.)
    """

    median: float  #: exp(median of ln values), GB/s (the median itself for an odd count)
    log_median: float
    scale: float  #: max(1.4826 x MAD of ln values, noise_floor): a relative (log) standard deviation
    n: int

    @classmethod
    def of(cls, values: Iterable[float], policy: DetectionPolicy) -> Baseline | None:
        """The baseline of ``values``; ``None`` when there is no positive value to compare with."""
        logs = [math.log(v) for v in values if v > 0]
        if not logs:
            return None
        med = statistics.median(logs)
        mad = statistics.median(abs(v - med) for v in logs)
        return cls(
            median=math.exp(med),
            log_median=med,
            scale=max(MAD_TO_SIGMA * mad, policy.noise_floor),
            n=len(logs),
        )

    def z(self, value: float) -> float:
        """Modified z-score of ``value`` on the log scale (``-inf`` for a zero bandwidth)."""
        if value <= 0:
            return -math.inf
        return (math.log(value) - self.log_median) / self.scale

    def drop(self, value: float) -> float:
        """Relative shortfall ``1 - value / median`` (negative when faster)."""
        return 1.0 - value / self.median

    def is_low(self, value: float, policy: DetectionPolicy) -> bool:
        """Both robustly and materially below the centre."""
        return self.z(value) < -policy.z_threshold and self.drop(value) >= policy.min_drop
