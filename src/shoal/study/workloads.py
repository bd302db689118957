"""The workloads of a study: each one timed at every node count of the cluster
and on the reference, with the same program and size, ranks per device = its cores (on the
cluster, or ``work_ranks_per_node``: one per box, as seed 002 ran).

Rows go to the study run's ``work`` table (``work_failures`` for runs that
failed), in the columns of ``shoal work`` (shoal.work.records).

Repetitions run in rounds over the configurations (1, 2, 3, 4, reference, 1,
2, ...), so a slow spell of a shared host touches every configuration alike
instead of bending one of them. A point (a workload at one configuration)
leaves the rounds once the 95 % CI of its median time is within the study's
``ci`` of the median, or its repetitions or seconds are spent, or the CI could
not reach ``ci`` within them (``Precision``); the analysis flags the points
that stopped for any reason but the first.
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass
from typing import Any

from shoal.execute.placement import Placement
from shoal.execute.session import Session
from shoal.bench import stats
from shoal.runs.store import Run
from shoal.study import blades
from shoal.work import runner as work_runner

TABLES = work_runner.Tables(results="work", failures="work_failures", traffic="work_traffic")


@dataclass
class WorkPlans:
    """Every (workload, size) of a study, planned on the cluster and on a local reference."""

    cluster: list[work_runner.Plan]
    local: list[work_runner.Plan]  # --reference host: the same runs on this machine

    @property
    def total_runs(self) -> int:
        return sum(p.total_runs for p in self.cluster + self.local)


def plan(request: Any, spec: str | None, devices: list, cluster_counts: list[int], label: str,
         reference_nodes: list, reference_label: str) -> WorkPlans:
    """Plan the study's workloads (nothing starts): ``devices`` are the cluster's nodes,
    ``reference_nodes`` the emulated reference devices (none: host or no reference)."""
    cluster_plans, local_plans = [], []
    for name in request.workload_list:
        for size in request.work_size_list(name):
            base = work_runner.WorkRequest(
                workload=name, size=size, reps=request.work_reps, mpi=request.mpi, emulate=spec,
                cluster=request.cluster, attach=request.attach, link=request.link,
                power="model" if spec or request.attach else request.power,
                wait=request.work_wait, wait_otherwise="backoff", dilation=request.dilation,
                host_speed=request.host_speed, recalibrate=request.recalibrate, launch=request.launch,
                bcast=request.bcast)
            emulated = bool(spec or request.attach)
            per_node = request.work_ranks_per_node or (devices[0].profile.cores if emulated
                                                       else devices[0].slots)
            placements = [Placement(label, n, per_node, tuple(d.name for d in devices[:n]))
                          for n in cluster_counts]
            if reference_nodes:
                names = [n.name for n in reference_nodes]
                cores = reference_nodes[0].profile.cores
                placements.append(dataclasses.replace(blades.work_reference(names, cores), label=reference_label))
                placements += blades.work_others(name, names)
            the_plan = work_runner.plan(base, placements=placements)
            cluster_plans.append(the_plan)
            if request.reference.local:
                local = dataclasses.replace(base, emulate=None, cluster=None, attach=None, link=None,
                                            power=request.power, dilation=None, launch="box")
                ranks = max(1, len(os.sched_getaffinity(0)))
                local_plans.append(work_runner.plan(local, placements=[
                    Placement(reference_label, 1, ranks, with_shared=False)]))
    return WorkPlans(cluster_plans, local_plans)


CONVERGED = "converged"
OUT_OF_REPS = "repetitions spent"
# The CI would stay above the target even at the most repetitions (shrinking as 1/sqrt(n)):
# on a host whose CPU speed wanders more than the target, repeating spends time for nothing.
OUT_OF_REACH = "out of reach on this host"
OUT_OF_TIME = "time budget spent"
MORE = "more"


@dataclass(frozen=True)
class Precision:
    """When a workload point has been repeated enough."""

    ci: float
    min_reps: int
    max_reps: int
    budget_s: float  # seconds of this host's time the point's runs may take
    warmup: int = 0  # first repetitions of every point, run but not counted

    @classmethod
    def of(cls, request: Any) -> "Precision":
        return cls(request.ci, request.work_min_reps, request.work_reps, request.work_point_budget_s,
                   request.work_warmup)

    def counted(self, rows: Any) -> Any:
        """The rows (a DataFrame) that count: repetitions after the warm-up."""
        return rows[rows["rep"].astype(int) >= self.warmup] if self.warmup else rows

    def state(self, times_s: list[float], host_s: float) -> str:
        """CONVERGED, OUT_OF_REPS, OUT_OF_REACH, OUT_OF_TIME, or MORE (repeat it again)."""
        if len(times_s) < self.min_reps:
            return OUT_OF_REPS if len(times_s) >= self.max_reps else MORE
        ci = ci_rel(times_s)
        if ci <= self.ci:
            return CONVERGED
        if len(times_s) >= self.max_reps:
            return OUT_OF_REPS
        # The budget counts once the point has the fewest repetitions that bound a median
        # (above): stopping before would spend its time without giving it a CI at all.
        if host_s >= self.budget_s:
            return OUT_OF_TIME
        if ci * math.sqrt(len(times_s) / self.max_reps) > self.ci:
            return OUT_OF_REACH
        return MORE


def ci_rel(times_s: list[float]) -> float:
    """Half the 95 % CI of the median over the median (inf below six repetitions),
    by the rule `shoal bench` stops on (shoal.bench.stats)."""
    return stats.summarize(times_s).ci_halfwidth_rel if times_s else float("inf")


def measure(run: Run, plans: list[work_runner.Plan], session: Session,
            events: work_runner.Events, precision: Precision) -> None:
    """Rounds over the placements until every point is precise enough or spent; one launch
    per placement and round runs every workload still repeating there (finished runs are
    kept: a resumed study continues from them)."""
    rows = run.rows(TABLES.results)
    done = {r["point_id"] for r in rows}
    times: dict[tuple, list[float]] = {}
    host_s: dict[tuple, float] = {}

    def key(placement: Placement, p: work_runner.Plan) -> tuple:
        return (placement.label, placement.nodes, placement.ranks, p.workload.name, p.size)

    def add(row: dict[str, Any]) -> None:
        if int(row["rep"]) < precision.warmup:
            return
        k = (row["config"], int(row["nodes"]), int(row["ranks"]), row["workload"], row["size"])
        times.setdefault(k, []).append(float(row["time_s"]))
        host_s[k] = host_s.get(k, 0.0) + float(row["time_s"]) * float(row.get("dilation") or 1)

    for row in rows:
        add(row)
    for failed in run.rows(TABLES.failures):
        done.add(failed["point_id"])   # a failed repetition is not tried again, the next one is
    placements = list(dict.fromkeys(pl for p in plans for pl in p.placements))
    for rep in range(precision.warmup + precision.max_reps):
        for placement in placements:
            todo = [p for p in plans if placement in p.placements
                    and precision.state(times.get(key(placement, p), []),
                                        host_s.get(key(placement, p), 0.0)) == MORE
                    and work_runner.records.point_id(placement.label, placement.nodes, placement.ranks,
                                                     p.workload.name, p.size, rep) not in done]
            if todo:
                for row in work_runner.measure_batch(run, todo, placement, rep, session, events,
                                                     TABLES):
                    if row is not None:
                        add(row)
