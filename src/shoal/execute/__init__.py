"""Where ranks run and how: the one tagged ``Where`` (local | emulated |
inventory | attached) with its one ``validate()``, placements, wait modes,
the energy meter and the run lifecycle that bench, work, study and dsm share.

Sits above shoal.cluster, shoal.power and shoal.mpi, below the commands'
libraries (bench, work, study, dsm). Modules load on first use.
"""
