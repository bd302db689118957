"""The stage programs of seed 004's scenarios (§VI-B), small and real.

``capture`` (a deterministic ~2.5 MB frame standing in for the camera),
``cap_enc`` (capture + AES-256-GCM after known-answer tests), ``knn_load``
and ``knn_classify`` (a numpy brute-force KNN), ``upload`` (HTTP PUT of each
frame), ``synthetic`` (timed work and data, for the schedule benchmark).
Each runs unchanged under systemd, systemd-socket-activate and the runner.
"""
