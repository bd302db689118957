"""Where ranks run: device profiles, inventories, emulated, ssh and Slurm clusters.

``open()`` and ``parse_nodes()`` are the entry points for commands that run
ranks (see ``shoal.cluster.session``). Heavy modules load on first use: the
launcher helper (``shoal.cluster.nsexec``) imports this package on every
rank start.
"""

from __future__ import annotations


def open(*args, **kwargs):  # noqa: A001 - mirrors the builtin on purpose: cluster.open(...)
    from shoal.cluster.session import open as _open

    return _open(*args, **kwargs)


def parse_nodes(text: str, available: int | None = None) -> list[int]:
    from shoal.cluster.session import parse_nodes as _parse

    return _parse(text, available)
