"""`shoal study` end to end on a small emulated cluster, and its report in a real browser."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import pandas as pd
import pytest

STUDY_ARGS = ["--emulate", "2xminnowboard", "--sizes", "8,4K", "--time-budget", "12",
              "--workloads", "raytrace,ep", "--work-size", "raytrace=64", "--work-size", "ep=M18",
              "--work-reps", "2"]
WORKLOADS = 2


def _profile(name: str) -> dict:
    from shoal import profiles

    p = profiles.load()[name]
    return {"idle_W": p.idle_W, "busy_W": p.busy_W}


def _shoal(*args, timeout=900):
    return subprocess.run([sys.executable, "-m", "shoal", *args], capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def study_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("study") / "run"
    proc = _shoal("study", *STUDY_ARGS, "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().endswith("report.html")
    return out


def _wait_expected(study_run) -> str:
    """Two ranks on a device whose CPU budget is under two CPUs: with CPU limits (a cgroup
    quota or the user-space throttle), polling would use up the budget, so they sleep until
    a socket event; without, backoff."""
    manifest = json.loads((study_run / "manifest.json").read_text())
    cluster = next(iter(manifest["clusters"].values()))
    return "event" if cluster["emulation"]["cpu_limit"] != "none" else "backoff"


def test_study_measures_every_node_count_and_the_reference(study_run):
    results = pd.read_csv(study_run / "results.csv")
    configs = set(zip(results["config"], results["nodes"], results["ranks"]))
    assert configs == {("2xminnowboard", 1, 2), ("2xminnowboard", 2, 2), ("reference", 1, 2)}
    assert len(results) == 3 * 8 * 2  # configurations x MPBench tests x sizes
    # Emulated devices have no meters: every power figure is modelled, and says so.
    assert (results["power_kind"] == "modelled").all()
    manifest = json.loads((study_run / "manifest.json").read_text())
    assert manifest["kind"] == "study" and manifest["status"] == "complete"
    assert manifest["reference"] == "nuc"
    assert set(manifest["stack"]["native"]) >= {"shoal-bench", "shoal-work"}
    assert manifest["stack"]["forks_since_boot"] > 0 and manifest["stack_during"]["forks"] >= 1


def test_study_times_each_workload_at_every_node_count_with_the_switch_counted_once(study_run):
    work = pd.read_csv(study_run / "work.csv")
    configs = set(zip(work["config"], work["nodes"], work["ranks"]))
    # Ranks per device = its cores (a MinnowBoard has 2, the NUC 2).
    assert configs == {("2xminnowboard", 1, 2), ("2xminnowboard", 2, 4), ("reference", 1, 2)}
    # configurations x workloads x (a warm-up + 2 counted repetitions)
    assert len(work) == 3 * WORKLOADS * 3
    assert set(work["workload"]) == {"raytrace", "ep"}
    assert (work["power_kind"] == "modelled").all()
    assert (work["wait_mode"] == _wait_expected(study_run)).all()
    # The cluster's switch (fast-ethernet-8, 2 W idle) is in every cluster row once, and in no
    # reference row: the NUC runs alone.
    cluster = work[work["config"] == "2xminnowboard"]
    assert cluster["shared_power_W"].tolist() == pytest.approx([2.0] * len(cluster))
    assert (work[work["config"] == "reference"]["shared_power_W"] == 0).all()
    # Gross includes the idle draw; net of idle is what the work adds.
    assert (work["energy_net_J"] < work["energy_J"]).all()
    findings = json.loads((study_run / "report" / "findings.json").read_text())[study_run.name]
    for w in findings["workloads"]:
        assert [p["nodes"] for p in w["cluster"]] == [1, 2] and w["reference"]["nodes"] == 1
        assert w["shared_power_W"] == pytest.approx(2.0)
        assert w["c"] == pytest.approx(2.0 / w["device_busy_W"])
        # Two node counts cannot support a fit: the report says so instead of an n*.
        assert w["fit"]["status"] == "too_few_points" and w["n_star"] is None
        assert w["verdict"].startswith(("cannot tell", "does not scale"))
        # Each point says how precisely its median is known: --work-reps 2 cannot bound it.
        for p in w["cluster"] + [w["reference"]]:
            assert p["reps"] == 2 and p["precision"] == "repetitions spent"
            # Equal where no rank waits: the two are sums of the same energy in another order.
            assert p["energy_spin_J"] >= p["energy_J"] * (1 - 1e-9) and p["energy_J"] > 0
    assert findings["precision"]["converged"] == 0 and findings["precision"]["points"] == 3 * WORKLOADS
    # No fit holds, so the first line says so, with every workload's reason.
    head = findings["headline"]["sleeping"]
    assert head["size"] is None and head["text"].startswith("cannot tell from the workloads")


def test_report_traces_every_number_to_a_results_row(study_run):
    report = (study_run / "report" / "report.html").read_text()
    results = pd.read_csv(study_run / "results.csv")
    shown = set(re.findall(r"<td>([\w.-]+/\d+/\d+/[\w.]+/\d+)</td>", report))
    assert shown and shown <= set(results["point_id"])
    # Modelled numbers carry the mark.
    assert report.count("class=\"modelled\"") >= len(shown)
    findings = json.loads((study_run / "report" / "findings.json").read_text())
    run = findings[study_run.name]
    for test in run["tests"]:
        for point in test["cluster"]:
            row = results.set_index("point_id").loc[point["point_id"]]
            column = "bandwidth_median_Bps" if test["metric"] == "bandwidth" else "rate_median_Hz"
            assert point["perf"] == pytest.approx(row[column])
            assert point["power_W"] == pytest.approx(row["power_mean_W"])
    # Spinning, every core that holds a rank draws busy watts for the whole point (the
    # thesis's condition): the NUC's two ranks fill its two cores; one MinnowBoard with two
    # ranks is busy, two boards with one rank each are half busy; the switch (2 W) on top.
    power = {(p["config"], p["nodes"]): p["power_spin_W"] for p in run["power"]}
    nuc, board = _profile("nuc"), _profile("minnowboard")
    assert power[("reference", 1)] == pytest.approx(nuc["busy_W"])
    assert power[("2xminnowboard", 1)] == pytest.approx(board["busy_W"] + 2.0)
    half = board["idle_W"] + 0.5 * (board["busy_W"] - board["idle_W"])
    assert power[("2xminnowboard", 2)] == pytest.approx(2 * half + 2.0)
    for test in run["tests"]:
        ref = test["reference"]["perf_per_W_spin"]
        assert test["ppw_vs_reference_spin"]["1"] == pytest.approx(test["cluster"][0]["perf_per_W_spin"] / ref)
    # Two node counts cannot support a fit: the report says so instead of an optimum.
    assert all(t["optimum"]["status"] == "cannot_tell" for t in run["tests"])
    assert run["overall_optimum"]["status"] == "cannot_tell"
    assert run["offload"]["verdict"]["choice"] in ("local", "offload", "neither")


def test_report_is_self_contained_with_every_figure(study_run):
    report = (study_run / "report" / "report.html").read_text()
    # 1 per workload, 1 power figure, 2 per MPBench test, 1 offload map.
    assert report.count("<figure>") == WORKLOADS + 1 + 2 * 8 + 1
    assert report.count("<svg") >= WORKLOADS + 1 + 2 * 8 + 1
    assert "Optimal cluster size from real workloads" in report
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", report)
    assert "<script" not in report and "@import" not in report
    summary = (study_run / "report" / "summary.md").read_text()
    assert "Offload decision" in summary and "mpbench.bandwidth" in summary
    assert "| raytrace 64 |" in summary and "| ep M18 |" in summary


def test_report_renders_in_headless_chromium(study_run, tmp_path):
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    assert browser, "chromium is installed by 'make setup' (Debian package chromium)"
    shot = tmp_path / "report.png"
    common = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
              "--disable-background-networking", "--disable-component-update", "--disable-sync",
              f"--user-data-dir={tmp_path / 'profile'}", "--enable-logging=stderr", "--v=0"]
    url = (study_run / "report" / "report.html").as_uri()
    dom = subprocess.run([*common, "--dump-dom", url], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert dom.stdout.count("<svg") >= 18 and "Process locally or offload" in dom.stdout
    for bad in ("Uncaught", "Failed to load resource", "net::ERR_"):
        assert bad not in dom.stderr
    snap = subprocess.run([*common, "--window-size=1200,2400", f"--screenshot={shot}", url],
                          capture_output=True, text=True, timeout=120)
    assert snap.returncode == 0, snap.stderr[-2000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 50_000  # a page with figures, not blank


def test_report_compares_runs_side_by_side(study_run, tmp_path):
    other = tmp_path / "other-run"
    shutil.copytree(study_run, other)
    out = tmp_path / "compare"
    proc = _shoal("report", str(study_run), str(other), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    page = (out / "report.html").read_text()
    assert page.count("class='verdict'") == 2
    assert f"{study_run.name}: 1 node" in page and "other-run: 1 node" in page


def test_report_refuses_a_benchmark_run(tmp_path):
    out = tmp_path / "bench"
    assert _shoal("bench", "--tests", "imb.PingPong", "--sizes", "8", "--budget", "0.1",
                  "--out", str(out)).returncode == 0
    proc = _shoal("report", str(out))
    assert proc.returncode == 2 and "use shoal plot" in proc.stderr


def test_study_bad_input_is_one_line(tmp_path, monkeypatch, capsys):
    """In this process, as the bad-input corpus runs its cases (tests/badinput)."""
    from shoal import cli

    monkeypatch.chdir(tmp_path)
    for args, expected in [(["--reference", "toaster"], "no such device profile"),
                           (["--suite", "osu"], "--suite osu"),
                           (["--uplink", "carrier-pigeon", "--nodes", "1"], "--uplink carrier-pigeon: use one of"),
                           (["--parallel-fraction", "2"], "--parallel-fraction: must be at least 0 and at most 1"),
                           (["--workloads", "toaster"], "unknown workload 'toaster'"),
                           (["--work-size", "msa"], "give NAME=SIZE"),
                           (["--work-size", "is=S"], "--work-size names is, which --workloads does not run"),
                           (["--work-size", "raytrace=3"], "raytrace size '3'"),
                           (["--suite", "none", "--workloads", "none"], "leaves nothing to measure")]:
        argv = ["study", "--emulate", "2xminnowboard", *args, "--out", str(tmp_path / "x")]
        monkeypatch.setattr(sys, "argv", ["shoal", *argv])
        code = cli.main(argv)
        out, err = capsys.readouterr()
        assert code == 2, (args, err)
        assert expected in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
        assert out == "" and not (tmp_path / "x").exists()


def test_report_on_a_torn_results_table_leaves_out_only_the_torn_row(study_run, tmp_path):
    copy = tmp_path / "torn"
    shutil.copytree(study_run, copy, ignore=shutil.ignore_patterns("report"))
    table = copy / "results.csv"
    data = table.read_bytes()
    table.write_bytes(data[: data.rstrip(b"\n").rfind(b"\n") + 40])  # a crash mid-row
    proc = _shoal("report", str(copy))
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    findings = json.loads((copy / "report" / "findings.json").read_text())
    shown = {p["point_id"] for t in findings["torn"]["tests"] for p in t["cluster"]}
    complete = pd.read_csv(study_run / "results.csv")["point_id"].iloc[:-1]
    assert shown <= set(complete)


def test_a_study_against_this_machine_runs_workloads_and_benchmarks_here_too(tmp_path):
    out = tmp_path / "host"
    proc = _shoal("study", "--reference", "host", "--emulate", "2xminnowboard", "--workloads", "ep",
                  "--work-size", "ep=M18", "--work-reps", "1", "--sizes", "8", "--time-budget", "5",
                  "--power", "model", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    work = pd.read_csv(out / "work.csv")
    reference = work[work["config"] == "reference"]
    # A warm-up and one counted repetition.
    assert len(reference) == 2 and (reference["shared_power_W"] == 0).all()
    assert int(reference["ranks"].iloc[0]) == len(os.sched_getaffinity(0))  # one per CPU of this machine
    results = pd.read_csv(out / "results.csv")
    assert set(results["config"]) == {"2xminnowboard", "reference"}
    assert json.loads((out / "manifest.json").read_text())["status"] == "complete"


def test_readme_picture_script_renders_a_study_run(study_run, tmp_path):
    """scripts/study-picture.sh RUN PNG: the README's picture from a run, by headless Chromium."""
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "scripts" / "study-picture.sh"
    png = tmp_path / "picture.png"
    proc = subprocess.run([str(script), str(study_run), str(png)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 50_000   # the report's top, not a blank page
    assert (int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")) == (1100, 1360)
    missing = subprocess.run([str(script), str(tmp_path / "no-run"), str(png)], capture_output=True, text=True)
    assert missing.returncode == 2 and "no report at" in missing.stderr
