"""The rules for the options that say where ranks run, each worded once.

``execute.where.Where.validate`` applies them to every command's request before
anything starts; ``cluster.open``/``bring_up`` apply them again to callers of the
library, and ``shoal cluster`` to its own options, all with these words.
"""

from __future__ import annotations

from shoal.errors import ShoalError


def one_cluster(emulate: str | None, cluster: str | None, attach: str | None) -> None:
    """At most one of --emulate, --cluster FILE and --attach."""
    given = [o for o, v in (("--emulate", emulate), ("--cluster FILE", cluster), ("--attach", attach)) if v]
    if len(given) == 2:
        raise ShoalError(f"give either {' or '.join(given)}, not both")
    if len(given) > 2:
        raise ShoalError("give only one of --emulate, --cluster FILE or --attach")


def link_needs_emulate(link: str | None, emulate: str | None) -> None:
    if link and not emulate:
        raise ShoalError("--link sets the link of emulated devices and needs --emulate SPEC; "
                         "an inventory's links are set in its file")


def dilation_applies(dilation: float | None, kind: str, emulated_here: bool,
                     cluster: str | None = None, mode: str | None = None) -> None:
    """--dilation slows devices emulated here, and is set when they come up. ``kind``: local,
    emulated, inventory or attached; ``cluster``/``mode``: an inventory's file and mode."""
    if dilation is None:
        return
    if kind == "local":
        raise ShoalError("--dilation applies to emulated clusters: add --emulate SPEC")
    if kind == "attached":
        raise ShoalError("--dilation is set when the cluster comes up ('shoal cluster up "
                         "--dilation D'), not when attaching to it")
    if not emulated_here:
        raise ShoalError(f"--dilation applies to emulated clusters; {cluster} reaches real hosts "
                         f"(mode {mode!r}): drop --dilation")


def up_needs_one(emulate: str | None, cluster: str | None) -> None:
    """`shoal cluster up` builds exactly one emulated cluster."""
    if bool(emulate) == bool(cluster):
        raise ShoalError("give either --emulate SPEC or --cluster FILE (an inventory with mode = \"emulated\")")
