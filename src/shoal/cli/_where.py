"""Option groups every command that runs MPI jobs shares: where ranks run,
and energy and waiting."""

from __future__ import annotations

import argparse

from shoal.inputs import options as typed
from shoal.execute import placement
from shoal.inputs import ranklimit
from shoal.inputs.grammar import MAX_SLOTS, Bounds


def add_cluster_choice(where: argparse._ArgumentGroup) -> None:
    """--emulate, --link, --cluster, --attach and --dilation: which cluster, if any."""
    where.add_argument("--emulate", type=typed.text, default=None, metavar="SPEC",
                       help="emulated cluster of devices, e.g. 4xminnowboard or 4xminnowboard+1xnuc")
    where.add_argument("--link", type=typed.text, default=None,
                       help="link of every emulated device: ethernet-100m, gigabit, wifi-n, docsis-27m")
    where.add_argument("--cluster", type=typed.text, default=None, metavar="FILE",
                       help="inventory file (TOML)")
    where.add_argument("--attach", type=typed.text, default=None, metavar="ID",
                       help="run on an emulated cluster already up ('shoal cluster up' prints its "
                            "ID), brought up once for many runs")
    where.add_argument("--dilation", type=typed.typed(_dilation, name="dilation"),
                       default=None, metavar="D",
                       help="run the emulated cluster D times slower than real time (times are "
                            "divided by D); default: the smallest whole D at which the devices' "
                            "CPU budgets fit this host")
    add_host_speed(where)


def add_background(where: argparse._ArgumentGroup) -> None:
    """--background: what emulated devices keep doing beside their ranks."""
    where.add_argument("--background", type=typed.typed(_background, name="background"),
                       default=None, metavar="PROFILE=NAME,...",
                       help="emulated devices of a profile keep doing this beside their ranks, "
                            "e.g. stb=mpeg2-sd (a box decoding an SD MPEG-2 programme streamed "
                            "down its plant, as in 'Embedded Processor Virtualization for "
                            "Broadband Grid Computing'); [backgrounds.NAME] in the profiles")


def add_qos(where: argparse._ArgumentGroup) -> None:
    """--qos: each emulated profile's upstream service flow on a shared plant."""
    where.add_argument("--qos", type=typed.typed(_qos, name="qos"), default=None,
                       metavar="PROFILE=RATE[/PRIORITY],...",
                       help="the most each device of a profile may send upstream on a shared plant "
                            "(its DOCSIS service flow), in bit/s, e.g. stb=10M, and the flow's "
                            "traffic priority, 0-7, higher served first (stb=10M/7); refused above "
                            "the upstream channel")


def add_storage(where: argparse._ArgumentGroup) -> None:
    """--storage: the file server each emulated profile's devices write their output to."""
    where.add_argument("--storage", type=typed.typed(_storage, name="storage"), default=None,
                       metavar="PROFILE=STORAGE,...",
                       help="the file server at the cluster's head that a job's rank 0 writes its "
                            "output to when it runs on a device of that profile, e.g. "
                            "xeon-blade=NAME for a [storage.NAME] of a profiles file; "
                            "without it the output stays in memory")


def _storage(text: str) -> dict[str, str]:
    from shoal.cluster import storage

    return storage.parse(text)


def _qos(text: str) -> dict[str, str]:
    from shoal.cluster import qos

    return qos.parse(text)


def _background(text: str) -> dict[str, str]:
    from shoal.cluster import background

    return background.parse(text)


def add_host_speed(where: argparse._ArgumentGroup) -> None:
    """--host-speed and --recalibrate: the host core emulated devices are held against."""
    from shoal.inputs.grammar import SPEED

    where.add_argument("--host-speed", type=typed.number(SPEED), default=None, metavar="N",
                       help="this host's core in reference cores, for every kernel (default: "
                            "measured on the reference kernels and cached per host)")
    where.add_argument("--recalibrate", action="store_true",
                       help="measure this host's core speed again instead of using the cached one")


def add_clock(where: argparse._ArgumentGroup) -> None:
    """--freq and --governor: the clock emulated devices are held at, or this machine's governor."""
    from shoal.profiles.clock import GOVERNORS

    where.add_argument("--freq", type=typed.FREQUENCY, default=None, metavar="HZ",
                       help="hold the emulated devices at their P-state of this clock (e.g. 500M, "
                            "1.33G): its speed sets their CPU budget, its watts their power model")
    where.add_argument("--governor", default=None, choices=GOVERNORS,
                       help="emulated devices: their highest (performance) or lowest (powersave) "
                            "P-state; this machine: the kernel's governor for the run where "
                            "permitted (else the current one, said and recorded)")


def add_where(p: argparse.ArgumentParser, nodes_default: str) -> argparse._ArgumentGroup:
    where = p.add_argument_group("where ranks run (default: this machine)")
    add_cluster_choice(where)
    add_background(where)
    add_qos(where)
    add_storage(where)
    add_clock(where)
    where.add_argument("--nodes", default=None, type=typed.COUNTS_TEXT,
                       help=f"node counts to sweep on the cluster: 1..4, 1,2,4,6 (default: {nodes_default})")
    where.add_argument("--ranks-per-node", type=typed.whole(1, MAX_SLOTS), default=1,
                       help="ranks on each node (default 1)")
    where.add_argument("--ranks-per-device", type=typed.typed(placement.parse_ranks_per_device,
                                                              name="ranks per device"),
                       default=None, metavar="PROFILE=N,...",
                       help="a mixed cluster's ranks by device profile, e.g. stb=1,xeon-blade=8 "
                            "(one job over set-top boxes and blades, as 'Embedded Processor Virtualization for "
                            "Broadband Grid Computing' ran them)")
    where.add_argument("--oversubscribe", type=typed.number(Bounds(1, 1024)), default=None, metavar="FACTOR",
                       help="ranks per CPU (per core of a device) at most (default "
                            f"{ranklimit.DEFAULT_OVERSUBSCRIBE}); more ranks are refused before anything starts")
    where.add_argument("--launch", default="box", choices=("box", "head"),
                       help="emulated clusters: box, the MPI's own launch with a daemon in every "
                            "device (default), or head, daemons in the head that start each rank "
                            "into its device (as the OERTE of 'Embedded Processor Virtualization for "
                            "Broadband Grid Computing' does; docs/cluster.md)")
    add_bcast(where)
    return where


def add_bcast(where: argparse._ArgumentGroup) -> None:
    """--bcast: how a large MPI_Bcast travels on emulated devices."""
    from shoal.cluster import plantcast

    where.add_argument("--bcast", default="mpi", choices=plantcast.MODES,
                       help="emulated clusters: mpi, the MPI's own broadcast (default), or multicast, "
                            "an MPI_Bcast of 8 KiB or more on MPI_COMM_WORLD sent down a shared medium "
                            "once as UDP multicast, lost datagrams sent again; jobs over switched links "
                            "keep the MPI's own (the overlay "
                            "'Embedded Processor Virtualization for Broadband Grid Computing' "
                            "plans for the cable plant; docs/cluster.md)")


def _dilation(text: str) -> float:
    from shoal.cluster import dilation

    return dilation.check(text)


def _power_spec(text: str) -> None:
    from shoal.power import spec

    spec.parse(text)


def _wait_mode(text: str) -> None:
    from shoal.wait import modes

    modes.parse_mode(text)


# --power/--source and --wait, checked by the grammars of shoal.power and
# shoal.wait while parsing; the text is kept as typed.
POWER_SPEC = typed.typed(_power_spec, keep_text=True, name="parse")
WAIT_MODE = typed.typed(_wait_mode, keep_text=True, name="parse_mode")


def add_energy(p: argparse.ArgumentParser, per: str) -> None:
    energy = p.add_argument_group("energy and waiting")
    from shoal.power import kinds as power_kinds

    energy.add_argument("--power", default=None, type=POWER_SPEC, metavar="SOURCE",
                        help=f"record joules per {per}: {power_kinds.syntax()} (emulated devices: their "
                             "profile model)")
    energy.add_argument("--idle", type=typed.SECONDS_OR_ZERO_NUMBER, default=0.0, metavar="SECONDS",
                        help="measure the idle baseline this long first and report energy above it")
    energy.add_argument("--wait", default=None, type=WAIT_MODE, metavar="MODE",
                        help="run ranks under libshoalwait: busy, yield, sleep:US, linear, backoff, "
                             "auto, event (default: not loaded; event on emulated devices)")
