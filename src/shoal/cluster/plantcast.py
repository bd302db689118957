"""A broadcast sent down the medium once (``--bcast multicast``): libshoalplantcast in every rank.

A cable plant's downstream reaches every box with one transmission, and an emulated
switch copies a group frame to each of its ports once; yet MPI_Bcast sends its message
along a tree of point-to-point transfers, N - 1 copies for N devices (on a plant each goes
up the shared upstream and down again). With ``--bcast multicast`` every rank of a job on
an emulated cluster runs with libshoalplantcast preloaded (``shoal/native/plantcast``):
an MPI_Bcast on MPI_COMM_WORLD of at least ``MIN_B`` bytes goes as UDP multicast from its
root, paced at the root's upstream rate, and what a rank missed is sent to it again,
point to point, so every rank has every byte. The programs are unchanged.

Only emulated clusters: their devices' links are shoal's own, so the group and the
pace are known; a real network's multicast is its administrator's to allow.
"""

from __future__ import annotations

from shoal import environment
from shoal.errors import ShoalError
from shoal.mpi.launch import preload_first

MODES = ("mpi", "multicast")
TARGET = "plantcast"
# Administratively scoped (RFC 2365), beside the backgrounds' programmes (239.77.0.x).
GROUP = "239.77.1.1"
PORT = 47100
# Smaller broadcasts go by the MPI: the datagrams and the gather that checks them cost more
# than a small message's tree.
MIN_B = 8192
# How long a rank waits for the next datagram of a broadcast once one came, and for the
# first, in device seconds (the root may reach its broadcast late).
IDLE_S = 0.5
WAIT_S = 60.0


def check(mode: str) -> str:
    """``mode`` if it is one of MODES (a request read back from a manifest is not parsed)."""
    if mode not in MODES:
        raise ShoalError(f"--bcast {mode}: use one of {', '.join(MODES)}")
    return mode


def refuse_unless_emulated(mode: str, kind: str) -> None:
    """--bcast multicast needs devices emulated here (their links are shoal's)."""
    if mode == "multicast" and kind not in ("emulated", "attached"):
        raise ShoalError("--bcast multicast sends broadcasts as multicast on emulated devices' links; "
                         "use --emulate SPEC or --attach ID (on real hosts or this machine, leave it out)")


def applies_to(links: list) -> bool:
    """Whether a job on devices with these links sends its broadcasts down the medium: all of
    them on one shared medium (a plant), whose downstream every device hears. A job over
    switched links (a study's reference blades beside its boxes) keeps the MPI's own."""
    return bool(links) and all(link.shared for link in links) and len({link.name for link in links}) == 1


def refuse_without_a_medium(mode: str, links: list) -> None:
    """--bcast multicast on emulated devices none of which is on a shared medium."""
    if mode == "multicast" and links and not any(link.shared for link in links):
        names = ", ".join(sorted({link.name for link in links}))
        raise ShoalError(f"--bcast multicast sends broadcasts down a shared medium, and no device here is "
                         f"on one (links: {names}); use a plant link such as --link docsis-27m, or leave "
                         "--bcast out")


def rank_env(mpi, links: list, dilation: float) -> dict[str, str]:
    """The ranks' environment: the library first in LD_PRELOAD (its MPI_Bcast ahead of
    libshoalwait's and the MPI's), the group, and the root's pace: the slowest upstream of
    ``links`` (the devices the job runs on), at dilation ``dilation``."""
    from shoal.mpi import build

    library = build.build(TARGET, mpi)
    rate = min(link.upstream_bps for link in links) / dilation
    env = {environment.PLANTCAST.name: f"{GROUP}:{PORT}", environment.PLANTCAST_IF.name: "eth0",
           environment.PLANTCAST_RATE_BPS.name: f"{rate:.6g}", environment.PLANTCAST_MIN_B.name: str(MIN_B),
           environment.PLANTCAST_IDLE_S.name: f"{IDLE_S * dilation:g}",
           environment.PLANTCAST_WAIT_S.name: f"{WAIT_S * dilation:g}"}
    # Counts of broadcasts, repairs and chunks sent again, where the user asks for them.
    if environment.PLANTCAST_STATS.is_set():
        env[environment.PLANTCAST_STATS.name] = str(environment.PLANTCAST_STATS.get())
    return env | {"LD_PRELOAD": str(library)}


def preloaded(job_env: dict[str, str], env: dict[str, str]) -> dict[str, str]:
    """``job_env`` with ``env`` added, the library ahead of whatever the job preloads."""
    return {**job_env, **env, "LD_PRELOAD": preload_first(env["LD_PRELOAD"], job_env.get("LD_PRELOAD"))}
