"""The S-DSM of seed 003 on MPI: libshoalsdsm's programs, their runs and the lab.

``apps`` runs one program (Full, Burst, Lock, Hough, Videostream) under a
wait mode and an MPI and reads back its report; ``placement`` holds Table 1's
placements and the modelled power of each device; ``lab`` reproduces
Experiments E, F and G side by side with Table 2's columns.
"""
