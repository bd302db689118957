"""`shoal run` and `shoal waitlab` end to end, through shoal.cli.main."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from shoal.cli import main
from shoal.cli import waitlab as waitlab_cli
from shoal.runs.store import Run
from shoal.wait import lab
from tests.wait.helpers import waittest


def _json_tail(out: str) -> dict:
    return json.loads([ln for ln in out.splitlines() if ln.startswith('{"mode"')][-1])


def test_run_launches_with_mode_and_summarises(any_mpi, capfd, tmp_path):
    code = main(["run", "--wait", "sleep:200", "--mpi", any_mpi.kind, "-n", "2",
                 "--telemetry", str(tmp_path), "--json", "--", str(waittest(any_mpi)),
                 "idle", "--seconds", "0.3"])
    out = capfd.readouterr().out
    assert code == 0
    summary = _json_tail(out)
    assert summary["mode"] == "sleep:200" and summary["exit_code"] == 0
    assert summary["ranks_reported"] == 2
    rank1 = [r for r in summary["summary"] if r["rank"] == 1 and r["class"] == "p2p"][0]
    assert rank1["sleeps"] > 100 and rank1["sleep_s"] > 0.2
    assert sorted(p.name for p in tmp_path.glob("rank-*.json")) == ["rank-0.json", "rank-1.json"]


def test_run_reports_predictions_per_call_site(openmpi, capfd, monkeypatch):
    """A receiver of regular messages: its call site's predictions in the
    JSON, and as a second table within 80 columns."""
    argv = ["run", "--wait", "backoff", "--mpi", "openmpi", "-n", "2", "--",
            str(waittest(openmpi)), "gaps", "--fixed", "0.02", "--count", "30", "--size", "8"]
    assert main([*argv[:7], "--json", *argv[7:]]) == 0
    sites = _json_tail(capfd.readouterr().out)["sites"]
    (recv,) = [s for s in sites if s["rank"] == 1 and s["function"] == "MPI_Recv"]
    # Every receive is a call of this site; a wait is a call whose first test found nothing,
    # so a receive that starts after its message came (rank 1 off the CPU for a gap, as on a
    # busy host: 28 of 30 once) is a call but no wait.
    assert recv["site"].startswith("shoal-waittest+0x") and recv["calls"] == 30
    assert recv["waits"] <= recv["calls"]
    assert recv["predicted"] > 0 and recv["hits"] + recv["early"] + recv["late"] == recv["predicted"]
    # The sender sleeps 20 ms between sends (a busy host only makes that longer): the site's
    # rhythm, a median over its arrivals, is a gap, not a burst's spacing.
    assert 0.8 * 0.02 <= recv["rhythm_s"] < 1.0
    monkeypatch.setenv("COLUMNS", "80")
    assert main(argv) == 0
    lines = capfd.readouterr().err.splitlines()
    assert max(map(len, lines)) <= 80
    assert any(line.strip().startswith("predicted arrivals per call site") for line in lines)
    shown = recv["site"].rpartition("+")[2]   # the offset; the object is in the JSON
    row = [line.split() for line in lines if line.split()[:3] == ["1", "Recv", shown]]
    assert len(row) == 1 and len(row[0]) == 11, "\n".join(lines)


def test_run_table_goes_to_stderr(mpich, capfd, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    code = main(["run", "--wait", "backoff", "-n", "2", "--", str(waittest(mpich)), "result",
                 "--rounds", "3"])
    captured = capfd.readouterr()
    assert code == 0
    assert '"result"' in captured.out
    assert "shoal run --wait backoff (MPICH" in captured.err
    # One whole row per rank and class, within 80 columns.
    lines = captured.err.splitlines()
    assert max(map(len, lines)) <= 80
    rows = [line.split() for line in lines if line.split()[:2] in (["0", "p2p"], ["1", "p2p"])]
    assert len(rows) == 2 and all(len(r) == 10 and "…" not in " ".join(r) for r in rows)


@pytest.mark.parametrize("kind", ["mpich", "openmpi"])
def test_run_injects_env_into_users_mpiexec(request, kind, capfd, tmp_path):
    mpi = request.getfixturevalue(kind)
    code = main(["run", "--wait", "linear:1000,50000,1000", "--telemetry", str(tmp_path),
                 "--json", "--", str(mpi.mpiexec), "-n", "2", str(waittest(mpi)), "idle",
                 "--seconds", "0.2"])
    out = capfd.readouterr().out
    assert code == 0, out
    summary = _json_tail(out)
    assert summary["mpi"] == mpi.name and summary["ranks_reported"] == 2
    assert all(r["mode"] == "linear:1000,50000,1000" for r in summary["summary"])


@pytest.mark.parametrize("argv,needle", [
    (["run", "--wait", "nap", "-n", "2", "--", "true"], "unknown wait mode 'nap'"),
    (["run", "--wait", "sleep:-1", "-n", "2", "--", "true"], "sleep needs a time"),
    (["run", "--wait", "backoff:50,-10", "-n", "2", "--", "true"], "backoff takes SPIN_US,CAP_US"),
    (["run", "--wait", "backoff:50,10000x", "-n", "2", "--", "true"], "backoff takes"),
    (["run", "--wait", "busy", "--", "true"], "-n N"),
    (["run", "--wait", "busy", "-n", "2"], "no program given"),
    (["run", "--wait", "busy", "-n", "2", "--", "/nonexistent/prog"], "not found"),
    (["run", "--wait", "busy", "-n", "2", "--classes", "disk", "--", "true"], "unknown class"),
])
def test_run_bad_input_is_one_line(argv, needle, capfd):
    code = main(argv)
    err = capfd.readouterr().err
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("shoal: ") and needle in lines[0]


def test_run_returns_program_exit_code(mpich, capfd):
    # A failing program: the ABI guard of a library built for Open MPI is not
    # involved here; shoal-waittest rejects an unknown subcommand with 2.
    code = main(["run", "--wait", "backoff", "-n", "2", "--", str(waittest(mpich)), "nosuch"])
    err = capfd.readouterr().err
    assert code != 0
    assert "no telemetry" in err


def test_waitlab_quick_subset_writes_tables_and_figures(tmp_path, capfd, monkeypatch):
    out = tmp_path / "lab"
    code = main(["waitlab", "--quick", "--mpi", "mpich", "--modes", "busy,backoff,linear:1,1000,1",
                 "--experiments", "A,D,lock", "--out", str(out), "--json"])
    printed = json.loads(capfd.readouterr().out.strip().splitlines()[-1])
    assert code == 0
    results = pd.read_csv(out / "results.csv")
    # 3 modes + MPICH's first own option (quick), 3 experiments each.
    assert len(results) == 12 and set(results["status"]) == {"ok"}
    assert set(results["contender"]) == {"busy", "backoff", "linear:1,1000,1", "mpich:heavy_yield"}
    d = results[results["experiment"] == "D"]
    assert d["reaction_p50_s"].notna().all() and (d["reaction_p50_s"] > 0).all()
    load = pd.read_csv(out / "load.csv")
    assert set(load["contender"]) == set(results["contender"]) and (load["load"] >= 0).all()
    reaction = pd.read_csv(out / "reaction.csv")
    assert reaction.groupby("contender").size().min() > 40
    for name in ("waitlab_A_load", "waitlab_D_reaction", "waitlab_patterns"):
        assert (out / f"{name}.png").stat().st_size > 10000
        assert (out / f"{name}.svg").exists()
    # The printed summary: a narrow table per experiment kind, every
    # contender named in full, within 80 columns.
    monkeypatch.setenv("COLUMNS", "80")
    waitlab_cli._table(Run(out))
    lines = capfd.readouterr().out.splitlines()
    assert max(map(len, lines)) <= 80
    for kind in ("A: CPU load", "D: reaction", "S-DSM patterns"):
        assert sum(line.startswith(kind) for line in lines) == 1
    contenders = [line.split()[0] for line in lines if line.split()[:1] in
                  [[c] for c in set(results["contender"])]]
    assert sorted(set(contenders)) == sorted(set(results["contender"]))
    assert "…" not in "".join(lines)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["quick"] is True
    assert len(printed["results"]) == 12


def test_waitlab_rejects_unknown_experiment(capfd):
    assert main(["waitlab", "--experiments", "A,Z"]) == 2
    assert "unknown waitlab experiment 'Z'" in capfd.readouterr().err


def test_waitlab_energy_through_power_session(tmp_path, capfd):
    out = tmp_path / "lab"
    code = main(["waitlab", "--quick", "--mpi", "openmpi", "--modes", "busy,backoff",
                 "--no-native", "--experiments", "lock", "--power", "model:2,6", "--out",
                 str(out)])
    assert code == 0, capfd.readouterr().err
    results = pd.read_csv(out / "results.csv")
    assert list(results["contender"]) == ["busy", "backoff"]
    # Modelled watts between 2 and 6 W over each launch (mpiexec start to exit).
    for row in results.itertuples():
        assert row.energy_kind == "modelled"
        assert row.launch_s > row.wall_s
        assert 2 * row.launch_s * 0.9 < row.energy_J < 6 * row.launch_s * 1.1
    power = pd.read_csv(out / "power.csv")
    assert len(power) > 0 and (power["power_W"].dropna() >= 2 - 1e-9).all()


def test_waitlab_rhythm_experiments(tmp_path, capfd, monkeypatch):
    """Regular gaps and Poisson arrivals beside A and D: CPU and reaction rows,
    and their own table."""
    out = tmp_path / "lab"
    code = main(["waitlab", "--quick", "--mpi", "mpich", "--modes", "busy,backoff", "--no-native",
                 "--experiments", "P10ms,poisson", "--out", str(out)])
    assert code == 0, capfd.readouterr().err
    capfd.readouterr()   # the lab's own tables; printed again below at 80 columns
    results = pd.read_csv(out / "results.csv")
    assert sorted(zip(results["experiment"], results["contender"])) == [
        ("P10ms", "backoff"), ("P10ms", "busy"), ("poisson", "backoff"), ("poisson", "busy")]
    assert set(results["status"]) == {"ok"}
    assert dict(zip(results["experiment"], results["messages"])) == {"P10ms": 40, "poisson": lab.POISSON_QUICK}
    assert (results["reaction_p50_s"] > 0).all() and (results["reaction_p99_s"] > 0).all()
    # The receiver that spins uses a core; the one that sleeps far less of it.
    busy, backoff = (results[results["contender"] == c]["cpu_load"].max() for c in ("busy", "backoff"))
    assert backoff < busy / 2
    monkeypatch.setenv("COLUMNS", "80")
    waitlab_cli._table(Run(out))
    lines = capfd.readouterr().out.splitlines()
    assert sum(line.startswith("Rhythms: regular gaps, Poisson arrivals") for line in lines) == 1
    assert max(map(len, lines)) <= 80


def test_waitlab_plan_as_a_library_call(mpich):
    """`wait.lab.plan` without the command line: the defaults of --quick, modes with commas
    kept whole, the launches counted; a bad request refused before anything runs."""
    from shoal.errors import ShoalError

    quick = lab.plan(lab.LabRequest(mpis=("mpich",), quick=True))
    assert quick.modes == lab.QUICK_MODES and quick.experiments == lab.QUICK_EXPERIMENTS
    assert "C" in quick.experiments
    # Every mode a user can choose runs in a first look (seed003 is the linear ramp).
    names = {"linear" if m == "seed003" else m.partition(":")[0] for m in quick.modes}
    assert names == {"busy", "yield", "sleep", "linear", "backoff", "auto", "event"}
    # + MPICH's first knob; Experiment C: 4 sweeps and 2 cyclictest runs on this host.
    assert quick.total == (len(lab.QUICK_MODES) + 1) * (len(lab.QUICK_EXPERIMENTS) - 1) + 6
    emulated = lab.plan(lab.LabRequest(mpis=("mpich",), quick=True, emulate="2xrpi3+1xodroid-xu4"))
    # C at the host, rpi3 and odroid-xu4; A under each contender on this host, then across two devices.
    assert emulated.experiments == ("C", "A")
    assert emulated.total == 3 * 6 + 2 * (len(lab.QUICK_MODES) + 1)
    mine = lab.plan(lab.LabRequest(modes="busy,linear:1,1000,1", experiments="A,lock", mpis=("mpich",),
                                   native=False))
    assert mine.modes == ("busy", "linear:1,1000,1") and mine.total == 4
    with pytest.raises(ShoalError, match="no MPI given"):
        lab.plan(lab.LabRequest(mpis=("",)))
    with pytest.raises(ShoalError, match="unknown waitlab experiment 'Z'"):
        lab.plan(lab.LabRequest(experiments="A,Z", mpis=("mpich",)))
