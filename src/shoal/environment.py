"""Every ``SHOAL_*`` environment variable, in one list: name, meaning, default.

shoal's Python code reads and sets these only through the ``Variable``
objects here (a test checks that no other module names one); the native
programs read theirs with ``getenv`` (marked "native"). The table in
docs/architecture.md is ``markdown_table()`` of this list (a test checks
they agree).

Standard library only: the emulated cluster's launcher helper imports it
on every rank start.
"""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Variable:
    name: str
    meaning: str
    #: The default as the table shows it.
    default: str
    #: The value ``get()`` gives when unset or empty (None: the reader computes its default).
    fallback: str | None = None
    #: Who reads it: "shoal", "native" (a C program), or "internal" (shoal sets it for itself).
    reader: str = "shoal"

    def get(self) -> str | None:
        """The value, or ``fallback`` when the variable is unset or empty."""
        return os.environ.get(self.name) or self.fallback

    def is_set(self) -> bool:
        return bool(os.environ.get(self.name))


MPI = Variable("SHOAL_MPI", "the MPI when --mpi is not given (as --mpi takes it)",
               "the default of --mpi")
CACHE = Variable("SHOAL_CACHE", "where native programs are built and cached (per MPI identity)",
                 "$XDG_CACHE_HOME/shoal, else ~/.cache/shoal")
RUNS = Variable("SHOAL_RUNS", "where run directories go when --out is not given", "runs", "runs")
PROFILES = Variable("SHOAL_PROFILES", "more device profile files (TOML), colon-separated",
                    "none")
SSH = Variable("SHOAL_SSH", "program used instead of ssh to reach real hosts (checks, launcher, "
               "remote power samplers)", "ssh from PATH")
STATE_DIR = Variable("SHOAL_STATE_DIR", "where emulated clusters are recorded (for status, "
                     "down and the reaping of crashed runs)", "/run/shoal", "/run/shoal")
CGROUP_ROOT = Variable("SHOAL_CGROUP_ROOT", "cgroup file system the emulated devices' CPU limits "
                       "are made in", "/sys/fs/cgroup", "/sys/fs/cgroup")
USERNS = Variable("SHOAL_USERNS", "'always': emulate in a user namespace even as root",
                  "only when not root")
USERNS_INSIDE = Variable("SHOAL_USERNS_INSIDE", "set by shoal inside its user namespace",
                         "unset", reader="internal")
USERNS_OWNER = Variable("SHOAL_USERNS_OWNER", "set by shoal: pid:start time of the command on "
                        "the host, owner of a user-namespace cluster", "unset", reader="internal")
USERNS_HOST_STATE = Variable("SHOAL_USERNS_HOST_STATE", "set by shoal: the host's state root, "
                             "where a user-namespace cluster's records are mirrored", "unset",
                             reader="internal")
USERNS_ENTRY = Variable("SHOAL_USERNS_ENTRY", "set by shoal: pid:start time of the process on the "
                        "host whose child runs inside a user-namespace cluster, where it is not "
                        "the owner (an ordinary user's cluster agent)", "unset", reader="internal")
AGENT_PLAN_FD = Variable("SHOAL_AGENT_PLAN_FD", "set by shoal: the descriptor an ordinary user's "
                         "cluster agent reads its plan from, in its user namespace", "unset",
                         reader="internal")
AGENT_UDP_FD = Variable("SHOAL_AGENT_UDP_FD", "set by shoal: the UDP socket bound in the host's "
                        "network namespace for an ordinary user's agent's forwarder", "unset",
                        reader="internal")
AGENT_RELAY = Variable("SHOAL_AGENT_RELAY", "set by shoal: the Unix socket through which an "
                       "ordinary user's agent runs commands on the host for its share", "unset",
                       reader="internal")
USERNS_SCOPED = Variable("SHOAL_USERNS_SCOPED", "set by shoal once the command runs in a "
                         "delegated systemd scope", "unset", reader="internal")
CGROUP_DELEGATED = Variable("SHOAL_CGROUP_DELEGATED", "set by shoal: the v2 cgroup prepared for "
                            "this command's devices", "unset", reader="internal")
DEVICE_CORE = Variable("SHOAL_DEVICE_CORE", "set by shoal in each rank on an emulated device: "
                       "the device core it runs on (what the user-space CPU limit reads, and "
                       "shoal-sdsm reports)", "unset", reader="native")
DEVICE_RANK = Variable("SHOAL_DEVICE_RANK", "set by shoal in each rank started from the head "
                       "(the head launch layout): its index among the ranks of its device", "unset",
                       reader="internal")
DEVICE_PLACEMENT = Variable("SHOAL_DEVICE_PLACEMENT", "set by shoal in each process it starts in an "
                            "emulated device: the device cluster's rank placement program (a "
                            "cluster over hosts names one per host)", "unset", reader="internal")
LINK_EMULATOR = Variable("SHOAL_LINK_EMULATOR", "how emulated links are made: netem, forwarder "
                        "(shoal-linkemu) or tbf (rates only)", "netem where the kernel has it, "
                        "else forwarder")
SYSFS_ROOT = Variable("SHOAL_SYSFS_ROOT", "where power sources look for /sys (tests: a fake tree)",
                      "/sys", "/sys")
PROC_ROOT = Variable("SHOAL_PROC_ROOT", "where the power model reads /proc/stat (tests: a fake "
                     "tree)", "/proc", "/proc")
POWER_FASTPOLL = Variable("SHOAL_POWER_FASTPOLL", "'0': sample sysfs sources in Python even at "
                          "high rates (no C poller)", "1", "1")
WAIT = Variable("SHOAL_WAIT", "libshoalwait's wait mode in each rank (set by shoal run, bench "
                "--wait, waitlab)", "backoff", reader="native")
WAIT_CLASSES = Variable("SHOAL_WAIT_CLASSES", "libshoalwait: call classes to rewrite (p2p, send, "
                        "coll)", "all", reader="native")
WAIT_TELEMETRY = Variable("SHOAL_WAIT_TELEMETRY", "libshoalwait: directory for per-rank "
                          "telemetry JSON", "none", reader="native")
WAIT_SLACK_NS = Variable("SHOAL_WAIT_SLACK_NS", "libshoalwait: timer slack of sleeping ranks (ns)",
                         "1", reader="native")
WAIT_FLOOR_NS = Variable("SHOAL_WAIT_FLOOR_NS", "libshoalwait: the shortest sleep this device "
                         "really sleeps (ns); backoff and auto spin until 1/8 of the time waited "
                         "covers it (set from shoal wait calibrate)", "0 (unknown)", reader="native")
WAIT_DILATION = Variable("SHOAL_WAIT_DILATION", "libshoalwait: how many times slower than real "
                         "time the ranks' device runs; every duration the other SHOAL_WAIT* "
                         "variables give is device time, and sleeps and the timer slack last that "
                         "many times longer (set by emulated clusters)", "1", reader="native")
WAIT_CALIBRATION = Variable("SHOAL_WAIT_CALIBRATION", "'off': launches keep libshoalwait's fixed "
                            "defaults instead of this host's or device's stored calibration "
                            "(shoal wait calibrate)", "use it", "use")
WAIT_WAKE = Variable("SHOAL_WAIT_WAKE", "libshoalwait: socket (a sleep ends at the first TCP socket "
                     "event) or timer (sleeps run their length); default socket for backoff, auto "
                     "and event, timer for sleep and linear", "by mode", reader="native")
WAIT_SEND_EAGER_B = Variable("SHOAL_WAIT_SEND_EAGER_B", "libshoalwait: blocking sends smaller than this "
                             "pass straight to MPI (B)", "16384", reader="native")
WAIT_ALLTOALL = Variable("SHOAL_WAIT_ALLTOALL", "libshoalwait: auto (MPI_Alltoall in the shape "
                         "of the MPI's blocking call), pairwise, bruck, or mpi (its nonblocking "
                         "form)", "auto", reader="native")
PLANTCAST = Variable("SHOAL_PLANTCAST", "libshoalplantcast: the multicast GROUP:PORT a large "
                     "MPI_Bcast goes down (set by --bcast multicast)", "unset: broadcasts by the MPI",
                     reader="native")
PLANTCAST_IF = Variable("SHOAL_PLANTCAST_IF", "libshoalplantcast: the interface the group is on",
                        "eth0", reader="native")
PLANTCAST_RATE_BPS = Variable("SHOAL_PLANTCAST_RATE_BPS", "libshoalplantcast: the root's pace "
                              "(bit/s of host time: its upstream's rate over the dilation)",
                              "0: unpaced", reader="native")
PLANTCAST_MIN_B = Variable("SHOAL_PLANTCAST_MIN_B", "libshoalplantcast: the smallest broadcast sent "
                           "as multicast (B)", "8192", reader="native")
PLANTCAST_IDLE_S = Variable("SHOAL_PLANTCAST_IDLE_S", "libshoalplantcast: how long a rank waits for "
                            "the next datagram of a round once one came (s)", "0.5", reader="native")
PLANTCAST_WAIT_S = Variable("SHOAL_PLANTCAST_WAIT_S", "libshoalplantcast: how long a rank waits for "
                            "a round's first datagram (s)", "60", reader="native")
PLANTCAST_STATS = Variable("SHOAL_PLANTCAST_STATS", "libshoalplantcast: a directory where each rank "
                           "writes plantcast-RANK.json at MPI_Finalize (broadcasts, ranks repaired, "
                           "chunks sent again)", "unset", reader="native")
STORE = Variable("SHOAL_STORE", "shoal-work: the file server (ADDRESS:PORT) rank 0 writes its "
                 "output to, a block at a time as its storage commits it (set by emulated clusters "
                 "whose devices carry @storage=NAME)", "unset: output kept in memory", reader="native")
BENCH_CORRUPT = Variable("SHOAL_BENCH_CORRUPT", "tests only: this rank of the benchmark program "
                         "flips a sent byte (to test --check)", "none", reader="native")
BENCH_CRASH = Variable("SHOAL_BENCH_CRASH", "tests only: this rank of the benchmark program "
                       "dies of SIGSEGV without a word as its last point starts (to test crash reports; "
                       "RANK:fault writes through a null pointer, the MPI's handlers in place)",
                       "none", reader="native")

ALL = (MPI, CACHE, RUNS, PROFILES, SSH, STATE_DIR, CGROUP_ROOT, USERNS, USERNS_INSIDE,
       USERNS_OWNER, DEVICE_CORE, DEVICE_RANK, DEVICE_PLACEMENT, LINK_EMULATOR, SYSFS_ROOT, PROC_ROOT, POWER_FASTPOLL, WAIT, WAIT_CLASSES, WAIT_TELEMETRY,
       WAIT_SLACK_NS, WAIT_FLOOR_NS, WAIT_DILATION, WAIT_CALIBRATION, WAIT_WAKE, WAIT_SEND_EAGER_B, WAIT_ALLTOALL,
       PLANTCAST, PLANTCAST_IF, PLANTCAST_RATE_BPS, PLANTCAST_MIN_B, PLANTCAST_IDLE_S, PLANTCAST_WAIT_S,
       PLANTCAST_STATS, STORE, BENCH_CORRUPT, BENCH_CRASH)
#: libshoalwait's variables: passed to ranks, and recorded with benchmark runs.
WAIT_VARIABLES = (WAIT, WAIT_CLASSES, WAIT_TELEMETRY, WAIT_SLACK_NS, WAIT_FLOOR_NS, WAIT_DILATION, WAIT_WAKE,
                  WAIT_SEND_EAGER_B, WAIT_ALLTOALL)


def state_root() -> str:
    """Where cluster records and the live-run registry live: SHOAL_STATE_DIR, else /run/shoal
    for root and the user's runtime directory (where it exists here) or cache directory
    for everyone else."""
    if STATE_DIR.is_set() or os.geteuid() == 0:
        return STATE_DIR.get()
    # A Slurm step or an ssh command may carry a runtime directory from another host.
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isdir(runtime) and os.access(runtime, os.W_OK | os.X_OK):
        return os.path.join(runtime, "shoal")
    return os.path.join(os.path.expanduser("~"), ".cache", "shoal", "clusters")


def markdown_table() -> str:
    """The variables as a Markdown table (docs/architecture.md holds this text)."""
    lines = ["| variable | meaning | default | read by |", "|---|---|---|---|"]
    lines += [f"| `{v.name}` | {v.meaning} | {v.default} | {v.reader} |" for v in ALL]
    return "\n".join(lines)
