"""The workloads of a study: each one timed at every node count of the cluster
and on the reference, with the same program and size, ranks per device = its cores.

Rows go to the study run's ``work`` table (``work_failures`` for runs that
failed), in the columns of ``shoal work`` (shoal.work.records). Repetitions
are interleaved over the configurations, so a slow spell of a shared host
spreads over the node counts instead of bending one of them.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Any

from shoal.execute.placement import Placement
from shoal.runs.store import Run
from shoal.work import runner as work_runner

TABLES = work_runner.Tables(results="work", failures="work_failures")


@dataclass
class WorkPlans:
    """Every (workload, size) of a study, planned on the cluster and on a local reference."""

    cluster: list[work_runner.Plan]
    local: list[work_runner.Plan]  # --reference host: the same runs on this machine

    @property
    def total_runs(self) -> int:
        return sum(p.total_runs for p in self.cluster + self.local)


def plan(request: Any, spec: str | None, devices: list, cluster_counts: list[int], label: str,
         reference_node: Any | None, reference_label: str) -> WorkPlans:
    """Plan the study's workloads (nothing starts): ``devices`` are the cluster's nodes,
    ``reference_node`` the emulated reference device (None: host or no reference)."""
    cluster_plans, local_plans = [], []
    for name in request.workload_list:
        for size in request.work_size_list(name):
            base = work_runner.WorkRequest(
                workload=name, size=size, reps=request.work_reps, mpi=request.mpi, emulate=spec,
                cluster=request.cluster, link=request.link, power="model" if spec else request.power,
                wait=request.work_wait, wait_otherwise="backoff", dilation=request.dilation)
            placements = [Placement(label, n, devices[0].profile.cores if spec else devices[0].slots,
                                    tuple(d.name for d in devices[:n])) for n in cluster_counts]
            if reference_node is not None:
                placements.append(Placement(reference_label, 1, reference_node.profile.cores,
                                            (reference_node.name,), with_shared=False))
            the_plan = work_runner.plan(base, placements=placements)
            cluster_plans.append(the_plan)
            if request.reference == "host":
                local = dataclasses.replace(base, emulate=None, cluster=None, link=None,
                                            power=request.power, dilation=None)
                ranks = max(1, len(os.sched_getaffinity(0)))
                local_plans.append(work_runner.plan(local, placements=[
                    Placement(reference_label, 1, ranks, with_shared=False)]))
    return WorkPlans(cluster_plans, local_plans)


def measure(run: Run, plans: list[work_runner.Plan], where: Any, meter: Any,
            events: work_runner.Events) -> None:
    """Run every plan at every placement, repetitions interleaved; one launch per placement
    and repetition runs every workload not yet done there (finished runs are kept: resume)."""
    done = {r["point_id"] for r in run.rows(TABLES.results)}
    reps = max((p.request.reps for p in plans), default=0)
    placements = list(dict.fromkeys(pl for p in plans for pl in p.placements))
    for rep in range(reps):
        for placement in placements:
            todo = [p for p in plans if placement in p.placements and rep < p.request.reps
                    and work_runner.records.point_id(placement.label, placement.nodes, placement.ranks,
                                                     p.workload.name, p.size, rep) not in done]
            if todo:
                work_runner.measure_batch(run, todo, placement, rep, where, meter, events, TABLES)
