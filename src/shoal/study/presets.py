"""Named studies that repeat a seed's experiments: the options they stand for, in one place.

A preset fills the study options a user did not give (anything given on the command
line wins) and is saved with the request, so ``--resume`` runs the same study.

``seed002`` is seed 002 §V on emulated set-top boxes (profile ``stb``, DOCSIS plant), one
rank per box as the seed ran:
Tachyon-like ray tracing at the seed's 512² (2048² is a minute and a half per run on 8
boxes), MASON-like sequence alignment on two of Table I's sets scaled to fit, and IMB at
the seed's smallest and largest sizes (64 B, 256 KiB) at 8, 16 and 32 boxes. Table I's
sets are scaled by 1/5 in both the number of sequences and their length: the pairwise
stage, which the boxes share, costs N² L², so each set costs 1/625 of the seed's (its
8-box times of 319-20854 s become 0.5-33 s), and the ratio of N to L, the seed's point
about many short sequences favouring the boxes, is kept. S20-L300 (S100-L1500) and S100-L40
(S500-L200) are its long-few and short-many ends. IMB's 12 tests at 32 boxes would take
hours on the shared 27 Mbit/s plant (an Alltoall of 256 KiB moves 32 x 31 x 256 KiB, 77 s
per call), so the quick study runs PingPong, Bcast and Allreduce, the tests the seed's
text gives numbers for. No reference system: an emulated 8-core Xeon blade (3.1 host CPUs)
would make the whole study run at dilation 3.
"""

from __future__ import annotations

from typing import Any

from shoal.errors import ShoalError

PRESETS: dict[str, dict[str, Any]] = {
    "seed002": {
        "emulate": "32xstb",
        "nodes": "8,16,32",
        "reference": "none",
        "workloads": "raytrace,msa",
        "work_ranks_per_node": 1,  # "each STB runs at most one MPI process" (§V)
        "work_sizes": {"raytrace": "512", "msa": "S20-L300,S100-L40"},
        # Six, the fewest whose order statistics bound a median at 95 %: each round of the
        # three node counts is three launches on up to 32 boxes, about a minute on 2 cores.
        "work_reps": 6,
        "suite": "imb.PingPong,imb.Bcast,imb.Allreduce",
        "sizes": "64,256K",
    },
}
# Presets that exist only as their quick variant so far, and why.
QUICK_ONLY = {
    "seed002": "the full study (128 boxes, IMB's 12 tests at six sizes, 2048² ray tracing) is not "
               "planned yet: a 128-box Alltoall of 256 KiB alone takes about 1250 s per call on the "
               "shared plant",
}


def values(name: str, quick: bool) -> dict[str, Any]:
    """The study options preset ``name`` stands for (a copy)."""
    if name not in PRESETS:
        raise ShoalError(f"--preset {name}: no such study preset; known: {', '.join(sorted(PRESETS))}")
    if not quick and name in QUICK_ONLY:
        raise ShoalError(f"--preset {name}: {QUICK_ONLY[name]}; add --quick")
    return {k: (dict(v) if isinstance(v, dict) else v) for k, v in PRESETS[name].items()}
