"""Workloads: fixed amounts of real work (seeds 002–004, NPB EP and IS) timed
at any rank or node count, checked against a serial reference, with energy
per run (``shoal work``; see docs/work.md)."""
