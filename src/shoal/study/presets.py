"""Named studies that repeat a seed's experiments: the options they stand for, in one place.

A preset fills the study options a user did not give (anything given on the command
line wins) and is saved with the request, so ``--resume`` runs the same study.

``seed002`` is seed 002 §V on emulated set-top boxes (profile ``stb``, DOCSIS plant), one
rank per box as the seed ran: 8, 16, 32, 64 and 128 boxes, IMB's 12 tests at the seed's six
sizes, Tachyon-like ray tracing at 512² and 2048², MASON-like sequence alignment on Table
I's seven sets scaled to fit, and the seed's computer cluster as the reference: 8 emulated
``xeon-blade`` on ``gigabit-blades`` with a rank on each of their 64 cores, writing the ray
tracer's image to the seed's NAS (``@storage=seed002-nas``), Bcast over 8..64 ranks, ray
tracing at 8 ranks too and the alignments on one processor (shoal.study.blades), where the
host holds them beside the boxes' dilation. 8 blades of 2.7 host CPUs each are 22
CPUs at real time, which no 2-core host holds below D = 15 (against D = 2 for the boxes): there
the study says so in one line and runs one blade with 8 ranks on its 8 cores (the seed's 8-rank
point), and ``--reference 8xxeon-blade`` runs all eight at D = 15.

Table I's sets are scaled by 1/5 in both the number of sequences and their length: the
pairwise stage, which the boxes share, costs N² L², so each set costs 1/625 of the seed's
(its 8-box times of 319-20854 s become 0.5-33 s), and the ratio of N to L, the seed's point
about many short sequences favouring the boxes, is kept.

IMB on the shared 27 Mbit/s plant: a 128-box Alltoall of 256 KiB moves 128 x 127 x 256 KiB
through the one upstream, about 1340 s per call, and every point also costs a fixed 5-39 s of
host time that grows with the boxes. The preset plans the whole study into 85 minutes
(``study_budget_s``, shoal.study.schedule): two rounds of the workloads (the warm-up and one
counted) as their rounds were measured, the blade's IMB, and IMB on the plant in what is left
(``shoal.study.bench_budget``): the costliest points are planned as not run, each with its cost
in the run's ``skipped`` table and the report, except the ones the seed's shapes need
(``imb_keep``: Bcast at every size and node count, Allreduce and Alltoall at 64 B). What is
left out is mostly at 64 and 128 boxes, where a point costs 21-39 s before its calls.

``seed002 --quick``: 8, 16 and 32 boxes, ray tracing at 512², two of Table I's sets
(S20-L300 from S100-L1500 and S100-L40 from S500-L200, the long-few and short-many ends),
IMB PingPong, Bcast and Allreduce (the tests the seed's text gives numbers for) at 64 B and
256 KiB, and no reference (an emulated blade would put the whole study at dilation 3).
"""

from __future__ import annotations

from typing import Any

from shoal.errors import ShoalError

# Seed 000 §5.5: MPBench's sizes from 8 B to 32 MiB (seed 001's curves run to 3.3e7 B), with
# 2^18 B, where the thesis reads its bandwidth tests as unstable ("218MB", shoal.study.seed000).
SEED000_SIZES = "8,2K,256K,32M"

SEED002_SIZES = "64,1K,8K,32K,128K,256K"  # seed 002 §V: 64, 1K, 8K, 32K, 128K and 256K bytes
# Seed 002 §V's twelve IMB-MPI1 tests, in its order.
SEED002_IMB = ",".join(f"imb.{t}" for t in (
    "PingPong", "Sendrecv", "Exchange", "Allreduce", "Reduce", "Reduce_scatter", "Allgather", "Gather",
    "Scatter", "Bcast", "Alltoall", "Barrier"))
# Table I's seven sets, S<N>-L<L> scaled to S<N/5>-L<L/5>, in the table's order.
SEED002_MSA_SCALE = 5
SEED002_MSA = "S20-L300,S40-L60,S60-L40,S100-L40,S40-L100,S100-L220,S300-L20"
# The seed's boxes ran no MPI daemon: its OERTE server beside mpirun at the head-end started
# each box's one rank and held its endpoints (§III), so ranks start from the head (--launch head).
SEED002_LAUNCH = "head"
# The seed's blades, each writing where the seed's master wrote its results: the NAS on their
# switch ([storage.seed002-nas], shoal.cluster.storage). The boxes keep theirs in memory: the
# seed's image was assembled and written by its master host, beside the NAS, while shoal's
# rank 0 runs on the first box, whose upstream the seed's writes never crossed.
SEED002_REFERENCE = "8xxeon-blade@storage=seed002-nas"

PRESETS: dict[str, dict[str, Any]] = {
    # Seed 000 §5.5-5.6 (Table 5.5): six MinnowBoard MAX against the NUC, MPBench's eight tests
    # to 32 MiB, and the default workloads for the sleeping and spinning headlines on six boards.
    # A 32 MiB call takes 2.85 s on the boards' 100 Mbit/s link (one bandwidth call measured on
    # two emulated boards) and up to 10 s for an allreduce on five or six, so a point is the
    # calibration's one call, which is also its warm-up, and one counted call (shoal-bench).
    "seed000": {
        "emulate": "6xminnowboard",
        "reference": "nuc",
        "suite": "mpbench",
        "sizes": SEED000_SIZES,
        "work_reps": 6,
        # 18 minutes planned, so the whole study ends within the 20 its readings are wanted in
        # on 2 cores: the workloads as measured, MPBench what they leave, its costliest 32 MiB
        # points planned as not run where they do not fit (shoal.study.schedule).
        "study_budget_s": 1080.0,
    },
    "seed002": {
        "emulate": "128xstb",
        "nodes": "8,16,32,64,128",
        # The seed's computer cluster: 8 blades of 8 cores on Gigabit Ethernet, fewer where they
        # would raise the study's dilation (one on a 2-core host; shoal.study.blades), writing
        # the ray tracer's image to the seed's NAS (its blades were "I/O bound" on it).
        "reference": SEED002_REFERENCE,
        "reference_fallback": True,
        "workloads": "raytrace,msa",
        "work_ranks_per_node": 1,  # "each STB runs at most one MPI process" (§V)
        "work_sizes": {"raytrace": "512,2048", "msa": SEED002_MSA},
        # One counted round after the warm-up: a round of every workload at 8..128 boxes and
        # the blade is about 20 minutes on 2 cores (WORK_ROUND_S), and a second counted round
        # would take the time of about 80 IMB points at 8-32 boxes.
        "work_reps": 1,
        "suite": SEED002_IMB,
        "sizes": SEED002_SIZES,
        # 85 minutes planned, so the whole study ends within 90 on 2 cores with 5 minutes for
        # the model's error: the workloads and the blade's IMB as measured, IMB on the plant
        # what they leave (shoal.study.schedule). Measured end to end: 83.9 minutes (docs/study.md).
        "study_budget_s": 5100.0,
        # The seed's Bcast from 8 to 128 boxes is averaged over its six sizes, so Bcast runs at
        # every size and node count; Allreduce and Alltoall at 64 B show the 128-box plant.
        "imb_keep": "imb.Bcast,imb.Allreduce@64,imb.Alltoall@64",
        "launch": SEED002_LAUNCH,
    },
}
# Host seconds of one round of the seed002 workloads (raytrace 512² and 2048², msa's seven
# sets: one launch per configuration) at D = 2 under the default MPI: the mean of the two
# rounds of the full preset's first end-to-end run (docs/study.md, "The full preset,
# measured"; the warm-up's 8-box share less its ~50 s set-up): 8 boxes 406-50 and 345 s,
# 16: 247 and 210, 32: 180 and 150, 64: 173 and 151, 128: 242 and 236, the blade 37 and 36.
# (Measured in pieces before, 277, 111, 111, 170, 200 and 111 s: 7 minutes short a run.)
# Seed000's default workloads (ray tracing, sequence alignment, video, EP: one launch per
# configuration) at D = 2: seven rounds took 237 and 268 s over 1..6 boards and the NUC in two
# full runs, the mean shared by each count's time in its runs (docs/study.md).
WORK_ROUND_S: dict[str, dict[Any, float]] = {
    "seed002": {8: 350.0, 16: 228.0, 32: 165.0, 64: 162.0, 128: 239.0, "reference": 36.0},
    "seed000": {1: 11.3, 2: 6.2, 3: 4.6, 4: 3.8, 5: 3.6, 6: 3.2, "reference": 3.5},
}
# Host seconds outside a study's parts (shoal.study.schedule.SETUP_S when not here): the six
# boards and the NUC up in 5 s with the host's core measured before (a first measurement takes
# about a minute more), down again, and the report.
SETUP_S: dict[str, float] = {"seed000": 90.0}
QUICK: dict[str, dict[str, Any]] = {
    # Seed 000 on the node counts its readings name (1, 3-4 and 6 boards), ray tracing alone.
    "seed000": {
        "emulate": "6xminnowboard",
        "nodes": "1,3,4,6",
        "reference": "nuc",
        "suite": "mpbench",
        "sizes": SEED000_SIZES,
        "workloads": "raytrace",
        "work_reps": 6,
    },
    "seed002": {
        "emulate": "32xstb",
        "nodes": "8,16,32",
        "reference": "none",
        "workloads": "raytrace,msa",
        "work_ranks_per_node": 1,
        "work_sizes": {"raytrace": "512", "msa": "S20-L300,S100-L40"},
        # Six, the fewest whose order statistics bound a median at 95 %: each round of the
        # three node counts is three launches on up to 32 boxes, about a minute on 2 cores.
        "work_reps": 6,
        "suite": "imb.PingPong,imb.Bcast,imb.Allreduce",
        "sizes": "64,256K",
        "launch": SEED002_LAUNCH,
    },
}


def values(name: str, quick: bool) -> dict[str, Any]:
    """The study options preset ``name`` stands for (a copy), its quick variant with ``quick``."""
    if name not in PRESETS:
        raise ShoalError(f"--preset {name}: no such study preset; known: {', '.join(sorted(PRESETS))}")
    table = QUICK[name] if quick and name in QUICK else PRESETS[name]
    return {k: (dict(v) if isinstance(v, dict) else v) for k, v in table.items()}
