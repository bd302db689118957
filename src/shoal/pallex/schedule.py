"""The earliest-start schedule of a stage DAG (pure).

A stage starts when its units are ready and every stage it needs has
finished its work (for a data need: sent its data), and takes its duration:

    start(s)  = max(ready(s), max over p in needs(s) of finish(p))
    finish(s) = start(s) + duration(s)
"""

from __future__ import annotations

from shoal.pallex.stagefile import App


def earliest(app: App, ready: dict[str, float], duration: dict[str, float]) -> dict[str, tuple[float, float]]:
    """stage -> (start, finish), in the units of ``ready`` and ``duration``."""
    out: dict[str, tuple[float, float]] = {}
    for name in app.order:  # topological: every need is placed before
        start = max([ready[name], *[out[p][1] for p in app.stages[name].needs]])
        out[name] = (start, start + duration[name])
    return out


def end(app: App, plan: dict[str, tuple[float, float]]) -> float:
    """When the application is done: the last sink finishes."""
    return max(plan[s][1] for s in app.sinks())
