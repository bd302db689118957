"""`shoal compare RUN_A RUN_B`: the stacks' differences and the points that moved beyond
their confidence intervals, on run directories as shoal bench writes them."""

from __future__ import annotations

import json

import pytest

from shoal import cli, stackfacts
from shoal.report import stack_compare
from shoal.runs.store import Run
from tests.test_stackfacts import fake_host

SIZES = (8, 1024, 65536)


def base(size: int) -> float:
    return 1e-5 * (1 + size / 1024)


def _bench_run(path, stack, times, during=None, tests=("mpbench.bandwidth", "mpbench.latency")):
    """A bench run directory: one results row per test and size, each time with its CI as
    the order statistics give it (here +-2 %), as shoal bench writes them."""
    run = Run.create("bench", ["shoal", "bench"], path)
    rows = []
    for test in tests:
        for size in SIZES:
            t = times.get((test, size), base(size))
            rows.append({"point_id": f"local/1/2/{test}/{size}", "config": "local", "nodes": 1,
                         "ranks": 2, "suite": "mpbench", "test": test, "size_B": size,
                         "metric": "bandwidth" if test.endswith("bandwidth") else "time",
                         "bytes_per_op_B": size, "converged": "true", "time_median_s": t,
                         "time_ci_low_s": t * 0.98, "time_ci_high_s": t * 1.02,
                         "bandwidth_median_Bps": size / t, "rate_median_Hz": 1 / t})
    run.append("results", rows)
    run.finish("complete")
    run.update_manifest(stack=stack, stack_during=during or {"background_cpus": 0.05, "forks_per_s": 3.0})
    return run


@pytest.fixture()
def stacks(tmp_path):
    ondemand = stackfacts.collect(fake_host(tmp_path / "host-a"))
    performance = stackfacts.collect(fake_host(tmp_path / "host-b", governor="performance"))
    return ondemand, performance


def test_a_governor_and_a_background_load_are_named_with_the_points_they_moved(tmp_path, stacks):
    ondemand, performance = stacks
    a = _bench_run(tmp_path / "a", ondemand, {})
    slower = {("mpbench.latency", 8): base(8) * 1.5, ("mpbench.bandwidth", 65536): base(65536) * 1.2,
              ("mpbench.latency", 1024): base(1024) * 1.03}   # CIs still overlap
    daemons = [{"comm": "systemd", "processes": 1, "cpu_s": 0.3}]
    a.update_manifest(stack_during={"background_cpus": 0.05, "forks_per_s": 3.0, "duration_s": 10.0,
                                    "background_top": daemons})
    b = _bench_run(tmp_path / "b", performance, slower, during={
        "background_cpus": 1.0, "forks_per_s": 4.0, "duration_s": 10.0,
        "background_top": [{"comm": "burner", "processes": 2, "cpu_s": 9.5},
                           {"comm": "systemd", "processes": 1, "cpu_s": 0.35}]})
    found = stack_compare.compare(a, b)
    named = {d.fact: (d.a, d.b) for d in found.differences}
    assert named.pop("governor") == ("ondemand", "performance")
    assert named.pop("during the run: background_cpus") == (0.05, 1.0)
    assert named.pop("during the run: background CPUs of 'burner'") == (0.0, 0.95)
    assert named.pop("cpufreq limits", None) is None   # the same limits on both
    assert named == {}, named   # forks 3 -> 4 per s is noise, not a difference
    moved = {(m.test, m.size_B): round(m.ratio, 2) for m in found.moved}
    assert moved == {("mpbench.latency", 8): 1.5, ("mpbench.bandwidth", 65536): 1.2}
    assert found.points == 6


def test_two_runs_of_the_same_stack_name_nothing(tmp_path, stacks, capsys):
    ondemand, _ = stacks
    a = _bench_run(tmp_path / "a", ondemand, {})
    # Within the CIs (2 % either side): the same result measured twice.
    b = _bench_run(tmp_path / "b", ondemand, {("mpbench.latency", 8): base(8) * 1.03},
                   during={"background_cpus": 0.1, "forks_per_s": 5.0})
    assert cli.main(["compare", str(a.path), str(b.path), "--out", str(tmp_path / "cmp")]) == 0
    out = capsys.readouterr().out
    assert "stack: no difference recorded" in out and "none of 6 point(s) moved" in out
    saved = json.loads((tmp_path / "cmp" / "compare.json").read_text())
    assert saved["stack_differences"] == [] and saved["moved"] == [] and saved["points_compared"] == 6
    figures = sorted(p.name for p in (tmp_path / "cmp").iterdir() if p.suffix == ".png")
    assert figures == ["mpbench.bandwidth.png", "mpbench.latency.png"]


def test_runs_of_different_tests_or_kinds_are_one_line_and_exit_2(tmp_path, stacks, capsys):
    ondemand, _ = stacks
    a = _bench_run(tmp_path / "a", ondemand, {})
    b = _bench_run(tmp_path / "b", ondemand, {}, tests=("imb.PingPong",))
    assert cli.main(["compare", str(a.path), str(b.path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "no test in common" in err and "Traceback" not in err
    work = Run.create("work", ["shoal", "work"], tmp_path / "w")
    work.finish("complete")
    assert cli.main(["compare", str(a.path), str(work.path)]) == 2
    assert "takes bench or study runs" in capsys.readouterr().err
    assert cli.main(["compare", str(a.path), str(tmp_path / "nothing")]) == 2
    assert "not a shoal run directory" in capsys.readouterr().err


def test_a_real_clusters_hosts_are_compared_node_by_node(stacks):
    ondemand, performance = stacks

    def manifest(second):
        nodes = [{"name": "n1", "profile": "nuc"}, {"name": "n2", "profile": "nuc"}]
        return {"stack": ondemand, "clusters": {"hosts": {"nodes": nodes, "node_stacks": {
            "n1": ondemand, "n2": second}}}}

    found = stack_compare.stack_differences(manifest(ondemand), manifest(performance))
    assert [(d.fact, d.a, d.b) for d in found] == [("node.n2.governor", "ondemand", "performance")]
    assert stack_compare.stack_differences(manifest(ondemand), manifest(ondemand)) == []


def test_with_repeats_a_point_moved_only_where_every_run_of_one_side_is_slower(tmp_path, stacks):
    ondemand, _ = stacks
    # Every run's CIs are narrow (+-2 %); from run to run the same stack moves 1.3x at 8 B
    # latency. B's 64 KiB bandwidth is 1.5x slower in every run of it.
    drift = [1.0, 1.3, 0.8, 1.15]
    a_runs = [_bench_run(tmp_path / f"a{i}", ondemand, {("mpbench.latency", 8): base(8) * d})
              for i, d in enumerate(drift[:2])]
    b_runs = [_bench_run(tmp_path / f"b{i}", ondemand, {("mpbench.latency", 8): base(8) * d,
                                                        ("mpbench.bandwidth", 65536): base(65536) * 1.5})
              for i, d in enumerate(drift[2:])]
    alone = stack_compare.compare(a_runs[0], b_runs[0])
    assert {(m.test, m.size_B) for m in alone.moved} == {("mpbench.latency", 8), ("mpbench.bandwidth", 65536)}
    found = stack_compare.compare(a_runs[0], b_runs[0], (a_runs[1],), (b_runs[1],))
    assert [(m.test, m.size_B, m.runs_a_s, m.runs_b_s) for m in found.moved] == [
        ("mpbench.bandwidth", 65536, (base(65536), base(65536)), (base(65536) * 1.5, base(65536) * 1.5))]
    assert found.moved[0].ratio == pytest.approx(1.5)
    assert [(m.test, m.size_B) for m in found.within_spread] == [("mpbench.latency", 8)]
    assert found.runs == (2, 2) and found.chance == pytest.approx(1 / 3)
    assert found.to_json()["repeats"] == [str(a_runs[1].path), str(b_runs[1].path)]


def test_the_cli_takes_repeats_of_either_side(tmp_path, stacks, capsys):
    ondemand, _ = stacks
    runs = [_bench_run(tmp_path / f"r{i}", ondemand, {}) for i in range(4)]
    assert cli.main(["compare", str(runs[0].path), str(runs[1].path), "--again-a", str(runs[2].path),
                     "--again-b", str(runs[3].path), "--json", "--out", str(tmp_path / "out")]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["runs"] == [2, 2] and shown["moved"] == [] and shown["moved_by_chance"] == pytest.approx(1 / 3)
