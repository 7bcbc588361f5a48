"""What the Ray/gloo straggler tests inject.

:data:`STRAGGLER_DELAY_S` is the injected straggler's delay per operation. A gloo op of the tests' sizes (1 and
8 MiB) takes a few ms on loopback (about 2 ms floor, +-50% run to run: bench/MEASUREMENTS.md) and a few tens of
ms on two cores loaded by a CPU hog; 1 s makes the slow rank 20-100x slower whatever the load, so the detector's
z and drop cuts are met with a wide margin (a 0.2 s delay was only 3-5x under load, and the tests went red on a
loaded CI machine).
"""

STRAGGLER_DELAY_S = 1.0

#: The 8-node localisation test runs four pairs at once on the two cores; under a CPU hog healthy pairs of one
#: round were seen 14x apart (0.73 vs 0.053 GB/s at 8 MiB), which widens the robust scale so much that a 1 s
#: straggler (7.5x below the slowest healthy pair) was rightly not condemned. It injects 5 s per operation on
#: 1 MiB messages (a healthy op: a few to tens of ms, loaded), 100x and more below the median, and times two
#: iterations after one warm-up so each round with the straggler stays near 15 s.
LOCALISE_DELAY_S = 5.0
LOCALISE_SIZES = [1 << 20]
LOCALISE_ITERS = 2
