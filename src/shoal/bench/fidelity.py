"""`shoal cluster fidelity`: how closely two emulated devices follow the link model.

Runs IMB PingPong and IMB Uniband (a window of messages in flight) between
two emulated devices over 64 B-4 MiB with ``shoal bench``, once per time
dilation asked for, and sets every result against the link model
(``cluster.linkmodel``): ping-pong time / expected one-way time, and
streaming bandwidth / the payload rate the link can carry. Each row also
says whether the host ran short of CPU while it was measured. A CPU line
sets a CPU-bound kernel on both devices (a rank per core) against one rank.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from shoal.bench import runner
from shoal.bench.sweep import Options
from shoal.cluster import inventory, linkmodel
from shoal.errors import ShoalError
from shoal.inputs.grammar import sizes as parse_sizes

PINGPONG = "imb.PingPong"
STREAM = "imb.Uniband"
SIZES = "64..4M:4"
IMB_WINDOW = 64
STREAM_MAX_B = 1 << 20


@dataclass
class FidelityRequest:
    link: str | None = None
    device: str = "nuc"
    mpi: str | None = None
    sizes: str = SIZES
    dilations: tuple[float | None, ...] = (1.0, 2.0)
    budget_s: float = 1.0
    out: Path | None = None


def model_path(device: str, link: str | None) -> linkmodel.Path:
    """The link model between two emulated devices of this profile on this link."""
    inv = inventory.from_emulate(f"2x{device}", link)
    a, b = inv.nodes[0].link, inv.nodes[1].link
    return linkmodel.path(a, b)


def rows_of(results: list[dict], path: linkmodel.Path, rendezvous_B: int | None = None) -> list[dict]:
    """measured / model for every ping-pong and stream result of one run (``rendezvous_B``:
    the size above which the MPI adds a round trip, ``Implementation.rendezvous_above_B``)."""
    rows = []
    for r in results:
        size = int(r["size_B"])
        base = {"size_B": size, "dilation": float(r.get("dilation") or 1.0),
                "host_slack": r.get("host_slack", ""), "host_slack_note": r.get("host_slack_note", "")}
        if r["test"] == PINGPONG:
            measured, model = float(r["time_median_s"]), path.one_way_s(size, rendezvous_B)
            rows.append({**base, "kind": "ping-pong", "measured": measured, "model": model,
                         "unit": "s", "ratio": measured / model,
                         "spread": [float(r["time_ci_low_s"]) / model, float(r["time_ci_high_s"]) / model]})
        elif r["test"] == STREAM and r.get("bandwidth_median_Bps") not in ("", None):
            measured, model = float(r["bandwidth_median_Bps"]), path.stream_Bps()
            rows.append({**base, "kind": "stream", "measured": measured, "model": model,
                         "unit": "B/s", "ratio": measured / model, "spread": None})
    return rows


def measure(request: FidelityRequest, command: list[str]) -> dict:
    """Measure at every dilation; return {model, runs: [{dilation, run, rows}]}."""
    if request.device and "x" in request.device:
        raise ShoalError(f"--device {request.device}: give one profile name, e.g. nuc; "
                         "fidelity always uses two devices of it")
    path = model_path(request.device, request.link)
    sizes = parse_sizes(request.sizes)
    # IMB Uniband keeps 64 messages in flight: at 4 MiB on a 27 Mbit/s link one
    # window takes 80 s, so the stream stops at 1 MiB and repeats fewer times.
    stream_sizes = [s for s in sizes if s <= STREAM_MAX_B] or sizes[:1]
    runs = []
    for d in request.dilations:
        slow = d or 1.0
        window_s = IMB_WINDOW * path.one_way_s(max(stream_sizes)) * slow
        # Every point gets a few round trips of its largest message at least: the first
        # repetitions after a smaller size still grow TCP's window (one MPI's 1 MiB over
        # docsis-27m read 1.27 of the model from two repetitions within 1 s, 1.006 from 4).
        pingpong_budget_s = max(request.budget_s, 4 * 2 * path.one_way_s(max(sizes)) * slow)
        parts = [(PINGPONG, sizes, Options(ci=0.02, budget_s=pingpong_budget_s, min_reps=10,
                                            point_timeout_s=max(30.0, 20 * path.one_way_s(max(sizes)) * slow + 20))),
                 (STREAM, stream_sizes, Options(ci=0.02, budget_s=request.budget_s, min_reps=3,
                                                point_timeout_s=max(30.0, 6 * window_s + 20)))]
        rows, failures, where = [], [], []
        for test, test_sizes, options in parts:
            bench = runner.BenchRequest(tests=test, sizes=",".join(map(str, test_sizes)),
                                        mpi=request.mpi, emulate=f"2x{request.device}",
                                        link=request.link, dilation=d, options=options)
            out = None
            if request.out is not None:
                out = request.out / f"{test.split('.')[1].lower()}-dilation-{'auto' if d is None else f'{d:g}'}"
            run, plan = runner.start(bench, command, out)
            runner.execute(run, plan)
            rendezvous_B = plan.mpi.impl.rendezvous_above_B(plan.mpi)  # the MPI is asked once per part
            rows += rows_of(run.rows("results"), path, rendezvous_B)
            failures += run.rows("failures")
            where.append(str(run.path))
        runs.append({"dilation": d, "run": ", ".join(where), "mpi": plan.mpi.name,
                     "rendezvous_above_B": rendezvous_B,
                     "failures": failures, "rows": rows, "cpu": cpu_line(request, plan.mpi, d)})
    return {"device": request.device, "link": path.uplink.name,
            "model": {"latency_s": path.latency_s, "rate_bps": path.rate_bps,
                      "stream_Bps": path.stream_Bps()},
            "runs": runs}


def cpu_line(request: FidelityRequest, mpi, d: float | None, reps: int = 3) -> dict:
    """The CPU-bound kernel on the two devices, one rank and a rank per core on each, against
    one rank on one device (``cluster.cpufidelity``)."""
    from shoal import cluster as clusters
    from shoal.cluster import cpufidelity

    cores = inventory.from_emulate(f"1x{request.device}").nodes[0].profile.cores
    configs = sorted({(1, 1), (2, 1), (1, cores), (2, cores)})
    with clusters.open(emulate=f"2x{request.device}", link=request.link, calibrate=False,
                       dilation=d) as where:
        return cpufidelity.measure(where, mpi, configs, reps, cpufidelity.STEPS)


def dilation_agreement(result: dict) -> list[dict]:
    """Per size and kind: the corrected result at each D over the one at the first D."""
    if len(result["runs"]) < 2:
        return []
    first = {(r["kind"], r["size_B"]): r["measured"] for r in result["runs"][0]["rows"]}
    out = []
    for run in result["runs"][1:]:
        for r in run["rows"]:
            ref = first.get((r["kind"], r["size_B"]))
            if ref:
                out.append({"kind": r["kind"], "size_B": r["size_B"], "dilation": r["dilation"],
                            "ratio": r["measured"] / ref})
    return out
