"""Run a study: the benchmark suite at every node count and on the reference
system, with power from the best source of each node, in one run directory.

Configurations (the ``config`` column of the results):

- the cluster's label (e.g. ``4xminnowboard``) at node counts 1..N: one
  rank per device, except at one device, which runs two ranks on its two
  cores as a single board would;
- ``reference``: the traditional system, two ranks on one machine — an
  emulated device of the reference profile beside the cluster, or this
  machine with its own power readings.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

from shoal import hostfacts
from shoal import cluster as clusters
from shoal.bench import runner
from shoal.bench.runner import BenchRequest, Plan
from shoal.execute.placement import Placement
from shoal.bench.sweep import Events, Options
from shoal.errors import ShoalError
from shoal.mpi import stack
from shoal.runs.store import Run
from shoal.study import bench_budget, blades, schedule, workloads
from shoal.study.request import StudyRequest

REFERENCE = "reference"
# Share of the time budget given to measuring; the rest goes to MPI start-up,
# cluster set-up, calibration and the report.
MEASURE_SHARE = 0.55


@dataclass
class StudyPlan:
    request: StudyRequest
    cluster_label: str
    plans: list[Plan]  # benchmarks: cluster (+ emulated reference), then a local reference if any
    work: workloads.WorkPlans  # the workloads, on the cluster and on a local reference
    # The sets of devices that compute at the same time: the cluster's, and the reference's.
    at_once: list[tuple[str, ...]] | None = None
    # The planned time of its parts, for a study with a time budget (shoal.study.schedule).
    timing: schedule.Schedule | None = None
    # One line when the reference runs on fewer devices than asked, and why (shoal.study.blades).
    reference_note: str | None = None

    @property
    def total_points(self) -> int:
        return sum(p.total_points for p in self.plans) + self.work.total_runs


def _attached_devices(request: StudyRequest) -> list:
    """The devices of a cluster already up; an emulated reference must be its last devices."""
    from shoal.cluster.session import attach

    devices = attach(request.attach).inventory.nodes
    reference = request.reference
    if reference.emulated:
        last = devices[-reference.count:]
        if len(devices) <= reference.count or any(d.profile.name != reference.profile for d in last):
            raise ShoalError(f"--reference {reference}: the last devices of cluster {request.attach} "
                             f"are not {reference.count} {reference.profile}; bring the cluster up with "
                             f"+{reference.count}x{reference.profile} at the end, or use --reference "
                             "host or none")
    return devices


def _emulate_spec(request: StudyRequest, reference=None) -> str | None:
    reference = reference or request.reference
    if not request.emulate:
        return None
    if not reference.emulated:
        return request.emulate
    from shoal import profiles

    known = profiles.load()
    if reference.profile not in known:
        raise ShoalError(f"--reference {reference}: no such device profile "
                         f"(known: {', '.join(sorted(known))}, or host, or none)")
    return f"{request.emulate}+{reference.term}"


def _at_once(request: StudyRequest, reference) -> list[tuple[str, ...]]:
    """The cluster's devices and the reference's compute at different times."""
    from shoal.cluster import inventory

    devices = [n.name for n in inventory.from_emulate(_emulate_spec(request, reference), request.link).nodes]
    return [tuple(devices[:-reference.count]), tuple(devices[-reference.count:])]


def _fit_reference(request: StudyRequest) -> tuple[StudyRequest, str | None]:
    """The request with the reference devices this host holds beside the cluster (a preset's)."""
    fitted = blades.fit(request, lambda ref: _emulate_spec(request, ref), lambda ref: _at_once(request, ref))
    if fitted.reference == request.reference:
        return request, None
    return dataclasses.replace(request, reference=fitted.reference, reference_fallback=False), fitted.note


def plan(request: StudyRequest) -> StudyPlan:
    request.validate()
    from shoal.cluster import inventory

    request, reference_note = _fit_reference(request)
    spec = _emulate_spec(request)
    if request.attach:
        devices = _attached_devices(request)
    else:
        devices = (inventory.from_emulate(spec, request.link).nodes if spec
                   else inventory.load(request.cluster).nodes)
    emulated_reference = bool(spec or request.attach) and request.reference.emulated
    k = request.reference.count if emulated_reference else 0
    cluster_nodes = devices[:-k] if k else devices
    reference_nodes = devices[-k:] if k else []
    ref_names = [n.name for n in reference_nodes]
    names = [n.name for n in cluster_nodes]
    label = request.emulate or request.attach or Path(request.cluster).stem
    counts = clusters.parse_nodes(request.nodes or f"1..{len(names)}", len(names))
    placements = [Placement(label, n, 2 if n == 1 else 1, tuple(names[:n])) for n in counts]
    if emulated_reference:
        placements.append(blades.imb_reference(ref_names))

    work = workloads.plan(request, spec, cluster_nodes, counts, label, reference_nodes, REFERENCE)
    plans: list[Plan] = []
    budget = None  # IMB's points within the study's time on a shared plant
    timing = None
    if request.suite != "none":
        base = BenchRequest(tests=request.suite, sizes=request.size_list, mpi=request.mpi,
                            emulate=spec, cluster=request.cluster, attach=request.attach,
                            link=request.link,
                            power="model" if spec or request.attach else request.power,
                            dilation=request.dilation, host_speed=request.host_speed,
                            recalibrate=request.recalibrate, launch=request.launch, bcast=request.bcast)
        plans.append(runner.plan(base, placements))
        if request.imb_budget_s is not None or request.study_budget_s is not None:
            budget, timing = _plan_within_budget(request, plans[0], cluster_nodes, reference_nodes, counts)
        spread = blades.bcast_placements(ref_names, reference_nodes[0].profile.cores) if k else []
        if spread and "imb.Bcast" in [t.strip() for t in request.suite.split(",")]:
            plans.append(runner.plan(dataclasses.replace(base, tests=blades.BCAST_TESTS), spread))
        if request.reference.local:
            local = BenchRequest(tests=request.suite, sizes=request.size_list, mpi=request.mpi,
                                 power=request.power)
            plans.append(runner.plan(local, [Placement(REFERENCE, 1, 2, with_shared=False)]))
    at_once = [tuple(names)] + ([tuple(ref_names)] if emulated_reference else [])
    study = StudyPlan(request, label, plans, work, at_once, timing, reference_note)
    options = _options(request, sum(p.total_points for p in plans))
    if budget is not None:
        # Long calls (a shared plant's, 32 MiB on slow Ethernet): a point is not hung before its
        # modelled calls could end.
        options.point_timeout_s = max(options.timeout_s, budget.point_timeout_s)
    for p in plans:
        p.request.options = options
    return study


def _plan_within_budget(request: StudyRequest, the_plan: Plan, cluster_nodes: list, reference: list,
                        counts: list[int]) -> tuple[bench_budget.Budget, schedule.Schedule | None]:
    """Plan the cluster's benchmark points that do not fit the study's budget as not run
    (shoal.study.bench_budget), at the dilation the devices will run at; with a study budget,
    theirs is what the set-up, the workloads and the reference leave of it."""
    at_once = [tuple(n.name for n in cluster_nodes)] + ([tuple(n.name for n in reference)] if reference else [])
    d = the_plan.request.planned_dilation(at_once)
    label = next(p.label for p in the_plan.placements if p.label != REFERENCE)
    points = [(p.test, p.size_B, placement.nodes, placement.ranks) for placement in the_plan.placements
              if placement.label == label
              for p in the_plan.points(placement.ranks, label, placement.nodes)[0]]
    keep = frozenset(w.strip() for w in (request.imb_keep or "").split(",") if w.strip())
    link = cluster_nodes[0].link
    what = schedule.benchmarks_there(request.suite, link)
    setup_s = schedule.setup_s(request.preset)
    timing = None
    budget_s = request.imb_budget_s
    if request.study_budget_s is not None:
        rounds = request.work_warmup + request.work_reps
        one_round = schedule.work_round_s(request.preset, counts, bool(reference)) \
            if request.workload_list else 0.0
        if one_round is None:
            raise ShoalError(f"the study's time budget needs the measured cost of its workloads' rounds, "
                             f"which preset {request.preset or '(none)'} does not hold; "
                             "give --imb-budget SECONDS instead")
        work_s = rounds * one_round
        ref_points = sum(len(the_plan.points(p.ranks, p.label, p.nodes)[0]) for p in the_plan.placements
                         if p.label == REFERENCE)
        ref_s = schedule.reference_imb_s(ref_points)
        if budget_s is None:
            budget_s = schedule.bench_share_s(request.study_budget_s, work_s, ref_s, setup_s, what)
    budget = bench_budget.plan(points, link, d, budget_s, keep)
    if request.study_budget_s is not None:
        timing = schedule.Schedule(request.study_budget_s, rounds, work_s, ref_s, budget_s, budget,
                                   setup_s, what)
    the_plan.not_run = {(label, *point): why for point, why in budget.not_run.items()}
    return budget, timing


def _options(request: StudyRequest, points: int) -> Options:
    """Per-point budget from the study's time budget; a looser CI target than bench."""
    per_point = MEASURE_SHARE * request.bench_budget_s / max(points, 1)
    per_point = min(2.0, max(0.05, per_point))
    return Options(ci=0.05, budget_s=per_point, min_reps=6, warmup=1)


def start(request: StudyRequest, command: list[str], out: Path | None) -> tuple[Run, StudyPlan]:
    study = plan(request)
    mpi = (study.plans or study.work.cluster)[0].mpi
    options = study.plans[0].request.options.describe() if study.plans else None
    run = Run.create("study", command, out, study=study.request.to_manifest(),
                     cluster_label=study.cluster_label, reference=str(study.request.reference),
                     options=options, mpi=mpi.describe(), host=hostfacts.collect(),
                     stack=stack.software(mpi, [p.program for p in (*study.plans,
                                                                    *study.work.cluster)]),
                     workloads=[{"name": p.workload.name, "size": p.size, "unit": p.workload.unit,
                                 "aes": p.aes, "aes_why": p.aes_why} for p in study.work.cluster])
    return run, study


def saved_request(path: Path) -> StudyRequest | None:
    """The request a study run directory was made with (None when it holds no study)."""
    try:
        manifest = json.loads((Path(path) / "manifest.json").read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(manifest, dict) or manifest.get("kind") != "study" or not manifest.get("study"):
        return None
    return StudyRequest.from_manifest(manifest["study"])


def resume(path: Path) -> tuple[Run, StudyPlan]:
    run = Run.open(path)
    manifest = run.manifest
    if manifest.get("kind") != "study":
        raise ShoalError(f"{path} is not a 'shoal study' run; give --resume a directory made by shoal study")
    study = plan(StudyRequest.from_manifest(manifest["study"]))
    run.drop_orphans("samples", "results")   # of a benchmark point stopped before its result row
    run.update_manifest(status="running", resumed=manifest.get("resumed", 0) + 1)
    return run, study


def measure(run: Run, study: StudyPlan, events: Events | None = None,
            work_events: workloads.work_runner.Events | None = None) -> None:
    """The workloads, then the benchmarks, on one cluster brought up once (and then on
    this machine for ``--reference host``)."""
    request = study.request
    work_events = work_events or workloads.work_runner.Events()
    precision = workloads.Precision.of(request)
    cluster_plans = [p for p in study.plans if p.request.on_cluster]
    local_plans = [p for p in study.plans if not p.request.on_cluster]
    first = (cluster_plans or study.work.cluster)[0].request
    with first.open(run, at_once=study.at_once) as session:
        described = run.manifest.get("clusters", {})
        described[study.cluster_label] = session.describe()
        run.update_manifest(clusters=described)
        workloads.measure(run, study.work.cluster, session, work_events, precision)
        for p in cluster_plans:
            runner.measure_in(run, p, session, events)
    if local_plans or study.work.local:
        with (local_plans or study.work.local)[0].request.open(run) as session:
            workloads.measure(run, study.work.local, session, work_events, precision)
            for p in local_plans:
                runner.measure_in(run, p, session, events)
    failures = len(run.rows("failures")) + len(run.rows(workloads.TABLES.failures))
    run.finish("complete" if not failures else "complete-with-failures")
