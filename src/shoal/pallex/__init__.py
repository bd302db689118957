"""Pallex (seed 004): an application split into stages that run while the device boots.

``stagefile`` reads and checks a stage file; ``units`` turns it into systemd
units; ``protocol`` is the stage side of the socket-passing protocol
(LISTEN_FDS/LISTEN_FDNAMES); ``runner`` runs the same stages without systemd
on a boot timeline and ``run`` keeps one such cycle as a run; ``boot``
reads boot profiles; ``seedtables`` holds seed 004's tables, ``lifetimes``
the battery lifetimes of a boot profile and ``figures`` their figure;
``project`` carries a run over to a device; ``lab`` runs the scenarios;
``sdanalyze`` builds a boot profile from ``systemd-analyze``; ``apps`` are
the scenarios' stage programs.
See docs/pallex.md.
"""
