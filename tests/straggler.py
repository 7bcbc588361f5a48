"""What the Ray/gloo straggler tests inject.

:data:`STRAGGLER_DELAY_S` is the injected straggler's delay per operation. A gloo op of the tests' sizes (1 and
8 MiB) takes a few ms on loopback (about 2 ms floor, +-50% run to run: bench/MEASUREMENTS.md) and a few tens of
ms on two cores loaded by a CPU hog; 1 s makes the slow rank 20-100x slower whatever the load, so the detector's
z and drop cuts are met with a wide margin (a 0.2 s delay was only 3-5x under load, and the tests went red on a
loaded CI machine).
"""

STRAGGLER_DELAY_S = 1.0
