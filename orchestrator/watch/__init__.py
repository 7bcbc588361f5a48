"""``fleetdx watch``: a running job's steps and output, followed live; stragglers, hangs, slowdowns and data
stalls named while the job runs (:mod:`.detect` the online rules, :mod:`.follow` the files, :mod:`.evidence`
the Flight Recorder dumps asked for on a hang, :mod:`.run` the loop)."""
