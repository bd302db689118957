"""waitlab's Experiment C kept as tables of a run: the sweeps and cyclictest, per place.

Tables:

``sleep``          every measure: place, condition, requested_s, measured_s (Fig. 4's dots)
``sleep_summary``  one row per place, source (``sweep`` or ``cyclictest``) and condition:
                   offset at zero, slope, lateness p50/p99, lateness at the longest sleep,
                   measures taken of those planned (a budget stops a slow place's sweep)

Rows are appended as each condition finishes; a resumed run skips the conditions it
has. A condition that fails is a summary row with its status, and the rest go on.
"""

from __future__ import annotations

from typing import Any, Callable

from shoal.errors import ShoalError
from shoal.runs.store import Run
from shoal.wait import cyclictest, sleepaccuracy
from shoal.wait.sleepaccuracy import CONDITIONS, Condition, Place, Sweep

SUMMARY_COLUMNS = [
    "device", "profile", "dilation", "source", "load", "slack", "status", "timer_slack_s", "spinners", "measures",
    "planned_measures", "offset_zero_s", "offset_zero_p99_s", "slope", "intercept_s", "lateness_p50_s", "lateness_p99_s",
    "longest_s", "lateness_longest_p50_s", "lateness_longest_p99_s", "wake_cpu_s",
]
SLEEP_COLUMNS = ["device", "profile", "load", "slack", "requested_s", "measured_s"]
# cyclictest idle and loaded, at the kernel's default slack (it sets none).
CYCLICTEST_CONDITIONS = (Condition("idle", "default"), Condition("loaded", "default"))
CYCLICTEST_S = {True: 2.0, False: 10.0}   # seconds per condition, quick and not


def steps(places: int) -> int:
    """Progress steps: one per sweep condition and cyclictest run, at each place."""
    return places * (len(CONDITIONS) + len(CYCLICTEST_CONDITIONS))


def run_experiment(run: Run, places: list[Place], sweep: Sweep, quick: bool,
                   on_done: Callable[[dict[str, Any]], None] | None = None,
                   cyclictest_s: float | None = None) -> list[dict[str, Any]]:
    """Every condition at every place, then cyclictest there (``cyclictest_s`` seconds per
    condition; None: 2 s quick, 10 s not); summary rows as they finish."""
    from shoal.mpi import build

    cyclictest_s = cyclictest_s or CYCLICTEST_S[quick]

    exe = str(build.build_host("sleepsweep"))
    done = {(r["device"], r["source"], r["load"], r["slack"]) for r in run.rows("sleep_summary")}
    why_not = cyclictest.unavailable()
    rows = []

    def keep(row: dict[str, Any]) -> None:
        run.append("sleep_summary", [row], columns=SUMMARY_COLUMNS)
        rows.append(row)
        if on_done:
            on_done(row)

    for place in places:
        tag = {"device": place.device, "profile": place.profile}
        summary_tag = {**tag, "dilation": place.dilation}
        for condition in CONDITIONS:
            if (place.device, "sweep", condition.load, condition.slack) in done:
                continue
            row = {**summary_tag, "source": "sweep", "load": condition.load, "slack": condition.slack, "status": "ok"}
            try:
                facts, requested, measured = sleepaccuracy.measure(place, sweep, condition, exe)
            except ShoalError as exc:
                row["status"] = f"failed: {exc}"
            else:
                run.append("sleep", ({**tag, "load": condition.load, "slack": condition.slack,
                                      "requested_s": float(r), "measured_s": float(m)}
                                     for r, m in zip(requested, measured)), columns=SLEEP_COLUMNS)
                row.update(sleepaccuracy.summarize(requested, measured),
                           timer_slack_s=facts["timer_slack_ns"] * 1e-9, spinners=facts["spinners"],
                           planned_measures=facts["planned"],
                           wake_cpu_s=sleepaccuracy.wake_cpu_s(facts))
            keep(row)
        for condition in CYCLICTEST_CONDITIONS:
            if (place.device, "cyclictest", condition.load, condition.slack) in done:
                continue
            row = {**summary_tag, "source": "cyclictest", "load": condition.load, "slack": condition.slack,
                   "status": "ok", "spinners": place.cores if condition.load == "loaded" else 0}
            if why_not:
                row["status"] = f"skipped: {why_not}"
            else:
                row.update(_cyclictest(place, condition, exe, cyclictest_s))
            keep(row)
    return rows


def _cyclictest(place: Place, condition: Condition, exe: str, seconds: float) -> dict[str, Any]:
    argv = cyclictest.argv(seconds)
    if condition.load == "loaded":
        argv = sleepaccuracy.beside_spinners(exe, place.cores, argv)
    try:
        done = place.run(argv, 60 + 3 * seconds)
    except ShoalError as exc:
        return {"status": f"failed: {exc}"}
    if not done.ok:
        if place.device != "host" and "scheduling policy" in done.stderr:
            return {"status": f"skipped: {cyclictest.IN_DEVICE}"}
        return {"status": f"failed: {done.error_line('cyclictest')}"}
    try:
        return cyclictest.summary(cyclictest.latencies(done.stdout))
    except ShoalError as exc:
        return {"status": f"failed: {exc}"}
