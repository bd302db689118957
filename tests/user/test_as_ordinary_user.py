"""What an ordinary user can do, done the way they do it.

CI runs these as uid 65534 (tests/test_user_tests_as_uid_65534.py): all of them without a
cgroup, and those marked ``cgroup`` (what they check turns on whether the user has a cgroup
to divide) once more inside a cgroup delegated to that user; as root they check the same
things on root's path. PATH lacks /usr/sbin (Debian's default for ordinary
users) and holds a directory nobody may read.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pandas as pd
import pytest

from shoal import profiles
from shoal.cluster import cpulimit, dilation, hostspeed, state
from shoal.study.request import DEFAULT_WORKLOADS

NOT_LIMITED = "emulated devices run at host speed"


def _user_env(tmp_path: Path) -> dict[str, str]:
    locked = tmp_path / "locked"
    if not locked.exists():
        (locked / "bin").mkdir(parents=True)
        locked.chmod(0)
    return {**os.environ, "PATH": f"{locked}/bin:/usr/local/bin:/usr/bin:/bin"}


def _shoal(tmp_path: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "shoal", *args], capture_output=True, text=True,
                          timeout=timeout, env=_user_env(tmp_path))
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


@pytest.mark.cgroup
def test_bench_on_emulated_devices_with_a_users_path(tmp_path):
    out = tmp_path / "run"
    # Each board also keeps decoding a programme (its frames on its first core, the stream
    # down its link), as the user's devices keep doing their own work beside the ranks.
    proc = _shoal(tmp_path, "bench", "--emulate", "2xminnowboard", "--nodes", "2",
                  "--background", "minnowboard=mpeg2-sd",
                  "--tests", "mpbench.latency", "--sizes", "8", "--power", "model",
                  # Repetitions of 0.1 s, ten at least: the point spans several of the slack
                  # monitor's samples (0.25 s apart), whatever the host's speed.
                  "--rep-time", "0.1", "--min-reps", "10", "--budget", "3",
                  "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    results = pd.read_csv(out / "results.csv")
    if cpulimit.detect().version != 0 or os.geteuid() == 0:
        # Device cores in CPU cgroups: the decoder's share of its core, and what the ranks lost.
        assert results["background_slack"].isin(["ok", "short"]).all(), results["background_note"]
        assert (results["background_cpu_share"] > 0).all()
    else:
        # Cores held from user space: the run says the background went unmeasured, and why.
        assert (results["background_slack"] == "unmeasured").all()
        assert results["background_note"].str.contains("without a CPU cgroup").all()
    minnow = profiles.load()["minnowboard"]
    # Each device's modelled power lies between its idle and busy watts; the shared switch
    # is charged once, at its idle draw.
    switch_W = profiles.load_switches()[profiles.load_links()[minnow.link].switch].idle_W
    assert (results["power_kind"] == "modelled").all()
    assert results["power_mean_W"].between(2 * minnow.idle_W * 0.999 + switch_W,
                                           2 * minnow.busy_W * 1.001 + switch_W).all()
    manifest = json.loads((out / "manifest.json").read_text())
    emulation = manifest["clusters"]["2xminnowboard@mpeg2-sd"]["emulation"]
    limited = cpulimit.detect().version != 0 or os.geteuid() == 0
    if limited:
        # A cgroup this user may divide: every device is held to its profile's CPU.
        assert emulation["cgroup"]["version"] in (1, 2)
        assert not any(NOT_LIMITED in w for w in emulation["warnings"])
        assert emulation["cpu_limit"] == "cgroup"
    else:
        # No cgroup to divide: each device core is held to its budget from user space.
        assert emulation["cgroup"]["version"] == 0
        assert emulation["cpu_limit"] == "user" and emulation["device_speed"] == "profile"
        assert NOT_LIMITED not in proc.stderr
        assert not any(NOT_LIMITED in w for w in emulation["warnings"])


@pytest.mark.cgroup
def test_waits_are_measured_across_two_emulated_boards_and_sleeps_inside_one(tmp_path):
    out = tmp_path / "waitlab"
    proc = _shoal(tmp_path, "waitlab", "--quick", "--mpi", "mpich", "--modes", "busy", "--experiments", "A,C",
                  "--emulate", "2xrpi3", "--no-native", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    rows = pd.read_csv(out / "results.csv")
    assert set(rows["place"]) == {"host", "rpi31->rpi32"} and (rows["status"] == "ok").all()
    # The receiver's CPU as a share of its board's core, which is a fraction of a host core
    # (how much of it a busy wait fills depends on what else the host runs).
    across = rows[rows["place"] == "rpi31->rpi32"].iloc[0]
    quota = json.loads((out / "manifest.json").read_text())["across_devices"]["receiver_quota"]
    assert 0 < quota < 1
    assert across["cpu_load"] > 0
    assert across["device_core_load"] == pytest.approx(across["cpu_load"] / quota)
    # C inside a board (its CPU budget, its dilation): the sweep measured sleeps when idle,
    # and cyclictest, refused real-time there, is a row that says so.
    sleeps = pd.read_csv(out / "sleep_summary.csv")
    inside = sleeps[sleeps["device"] == "rpi31"]
    sweep = inside[(inside["source"] == "sweep") & (inside["load"] == "idle")]
    assert len(sweep) == 2 and (sweep["status"] == "ok").all()
    assert (sweep["measures"] > 0).all() and (sweep["lateness_p50_s"] > 0).all()
    assert inside[inside["source"] == "cyclictest"]["status"].str.startswith("skipped: ").all()


@contextlib.contextmanager
def _cluster_up(tmp_path: Path, spec: str, name: str) -> Iterator[subprocess.CompletedProcess]:
    """``shoal cluster up`` for the block, ``cluster down`` after it (which must succeed)."""
    up = _shoal(tmp_path, "cluster", "up", "--emulate", spec, "--name", name, "--no-calibrate", timeout=300)
    try:
        assert up.returncode == 0, up.stderr
        yield up
    finally:
        down = _shoal(tmp_path, "cluster", "down", name)
        assert down.returncode == 0 and f"removed {name}" in down.stdout, down.stderr


@pytest.mark.cgroup
def test_emulated_device_cpu_is_limited_to_its_profile_where_a_cgroup_allows(tmp_path):
    name = f"l{os.getpid() % 100000}"
    with _cluster_up(tmp_path, "1xminnowboard", name) as up:
        record = state.read(name)  # root's record, or the host's copy of a user namespace's
        groups = [Path(g) for g in record["cgroups"]]
        if cpulimit.detect().version == 0 and os.geteuid() != 0:
            # No cgroup: the user-space limit holds the devices, for as long as the cluster is up.
            assert groups == [] and NOT_LIMITED not in up.stderr
            controllers = subprocess.run(["pgrep", "-u", str(os.getuid()), "-f",
                                          f"shoal.cluster.dutycycle --cluster {name}"],
                                         capture_output=True, text=True).stdout.split()
            assert len(controllers) == 1, up.stderr
            return
        # Two cores at 0.25 of the reference core: in each core's group the share of a host core
        # that runs as fast, against the host speed the cluster measured (a faster host's core
        # gives less: not 0.25 of it, as a test that held it to 0.25 found where this host read
        # 1.44 reference cores), over the cluster's dilation.
        minnow = profiles.load()["minnowboard"]
        emulation = record["emulation"]
        share = hostspeed.HostSpeed.from_record(emulation["host_speed"]).core_share(minnow)
        expected = dilation.budget(share, emulation["dilation"])
        cores = [g for g in groups if g.name.startswith("core") and g.parent.name == "minnowboard1"
                 and ((g / "cpu.max").exists() or (g / "cpu.cfs_quota_us").exists())]
        assert len(cores) == minnow.cores, groups
        for core in cores:
            if (core / "cpu.max").exists():
                quota, period = map(int, (core / "cpu.max").read_text().split())
            else:
                quota = int((core / "cpu.cfs_quota_us").read_text())
                period = int((core / "cpu.cfs_period_us").read_text())
            assert abs(quota / period - expected) < 0.01, (quota, period, emulation["host_speed"])
    assert not any(g.exists() for g in groups)


# Every default workload at its small size, two counted rounds each, and the default suite
# on one message size: what a study does, in a fraction of its time.
WORKLOADS = DEFAULT_WORKLOADS.split(",")
SMALL_STUDY = ["--emulate", "2xminnowboard", "--nodes", "1..2", "--sizes", "8", "--time-budget", "8",
               "--work-reps", "2", *(a for name in WORKLOADS for a in ("--work-size", f"{name}=small"))]


@pytest.fixture(scope="module")
def study_without_root(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    """One small study, run once for the tests that read it (each copies before it writes)."""
    base = tmp_path_factory.mktemp("study")
    out = base / "study"
    return out, _shoal(base, "study", *SMALL_STUDY, "--out", str(out))


def test_study_runs_without_root(study_without_root):
    out, proc = study_without_root
    assert proc.returncode == 0, proc.stderr
    assert (out / "report" / "report.html").is_file()
    assert "emulated clusters need root" not in proc.stderr
    assert set(pd.read_csv(out / "work.csv")["workload"]) == set(WORKLOADS)
    assert set(pd.read_csv(out / "results.csv")["nodes"]) == {1, 2}


def test_an_interrupted_study_resumes_without_root_and_keeps_what_it_measured(study_without_root, tmp_path):
    done, proc = study_without_root
    assert proc.returncode == 0, proc.stderr
    out = tmp_path / "study"
    shutil.copytree(done, out)
    # Interrupted after its warm-up and first counted round: the last repetition is missing.
    work = pd.read_csv(out / "work.csv")
    # (2 node counts + the reference) x workloads x (a warm-up + 2 repetitions)
    assert len(work) == 3 * len(WORKLOADS) * 3
    kept = work[work["rep"] <= 1]
    kept.to_csv(out / "work.csv", index=False)
    manifest = json.loads((out / "manifest.json").read_text())
    (out / "manifest.json").write_text(json.dumps({**manifest, "status": "interrupted"}))
    # The saved request is what --resume follows: it emulates, so it enters a user namespace.
    proc = _shoal(tmp_path, "study", "--resume", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "need root" not in proc.stderr
    again = pd.read_csv(out / "work.csv")
    assert len(again) == len(work) and sorted(again["rep"]) == sorted(work["rep"])
    # The finished rounds' rows are kept as they were, not measured again (a column that
    # only the new rows fill, such as a busy host's slack note, reads back as text).
    pd.testing.assert_frame_equal(again[again["rep"] <= 1].reset_index(drop=True), kept.reset_index(drop=True),
                                  check_dtype=False)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["resumed"] == 1


def test_cluster_up_is_seen_by_status_used_by_attach_and_removed_by_down(tmp_path):
    name = f"u{os.getpid() % 100000}"
    with _cluster_up(tmp_path, "2xminnowboard", name) as up:
        assert f"--attach {name}" in up.stdout
        status = _shoal(tmp_path, "cluster", "status", "--json")
        (row,) = [r for r in json.loads(status.stdout) if r["id"] == name]
        assert row["nodes"] == 2 and row["state"].startswith("up") and row["persistent"]
        matrix = _shoal(tmp_path, "cluster", "matrix", "--attach", name, "--bytes", "1000000", "--json",
                        timeout=300)
        assert matrix.returncode == 0, matrix.stderr
        (pair,) = json.loads(matrix.stdout)["pairs"]
        # The two devices talk over their shaped 100 Mbit/s link.
        assert 0.5 * 100e6 / 8 < pair["bandwidth_Bps"] < 1.05 * 100e6 / 8
    after = json.loads(_shoal(tmp_path, "cluster", "status", "--json").stdout)
    assert name not in [r["id"] for r in after]


def test_one_cluster_brought_up_once_serves_bench_work_dsm_and_study(tmp_path):
    name = f"a{os.getpid() % 100000}"
    with _cluster_up(tmp_path, "2xminnowboard", name):
        bench = _shoal(tmp_path, "bench", "--attach", name, "--tests", "imb.PingPong", "--sizes", "8",
                       "--budget", "1", "--out", str(tmp_path / "bench"))
        assert bench.returncode == 0, bench.stderr
        manifest = json.loads((tmp_path / "bench" / "manifest.json").read_text())
        assert manifest["jobs"][f"{name}/2/2"]["hosts"] == ["minnowboard1", "minnowboard2"]
        assert manifest["clusters"][name]["id"] == name
        work = _shoal(tmp_path, "work", "raytrace", "--attach", name, "--size", "64", "--reps", "1",
                      "--out", str(tmp_path / "work"))
        assert work.returncode == 0, work.stderr
        assert set(pd.read_csv(tmp_path / "work" / "results.csv")["nodes"]) == {1, 2}
        dsm = _shoal(tmp_path, "dsm", "run", "full", "--attach", name, "-n", "2", "--json")
        assert dsm.returncode == 0, dsm.stderr
        placed = json.loads(dsm.stdout)["cluster"]["placement"]
        assert [p["node"] for p in placed] == ["minnowboard1", "minnowboard2"]
        study = _shoal(tmp_path, "study", "--attach", name, "--reference", "none", "--workloads", "none",
                       "--sizes", "8", "--time-budget", "10", "--out", str(tmp_path / "study"))
        assert study.returncode == 0, study.stderr
        assert set(pd.read_csv(tmp_path / "study" / "results.csv")["nodes"]) == {1, 2}
        # Every run left the cluster as it found it: still up, for the next one.
        status = json.loads(_shoal(tmp_path, "cluster", "status", "--json").stdout)
        assert [r["id"] for r in status if r["id"] == name] == [name]



@pytest.mark.cgroup
def test_device_memory_is_held_to_its_profile_where_a_memory_cgroup_allows_and_said_where_not(tmp_path):
    from shoal.cluster import memlimit

    name = f"m{os.getpid() % 100000}"
    stb_B = profiles.load()["stb"].memory_B
    up = _shoal(tmp_path, "cluster", "up", "--emulate", "1xstb", "--name", name, "--no-calibrate",
                "--json", timeout=300)
    try:
        assert up.returncode == 0, up.stderr
        memory = json.loads(up.stdout)["emulation"]["memory_limit"]
        # An ordinary user's devices send unpaced too (Reno where the host allows namespaces no Cubic).
        assert json.loads(up.stdout)["emulation"]["tcp_congestion"] in ("cubic", "reno"), up.stdout
        if os.geteuid() == 0 or memlimit.detect(cpulimit.detect()).version:
            # A memory controller this user may divide: the box's 256 MiB, as the kernel holds it.
            assert memory["how"] == "cgroup" and memory["limit_B"] == {"stb1": stb_B}, memory
        else:
            # None delegated (the usual case for a user): the run goes on, and says so.
            assert memory["how"] == "none" and memory["why"], memory
            assert "device memory is NOT limited" in up.stderr
    finally:
        down = _shoal(tmp_path, "cluster", "down", name)
        assert down.returncode == 0 and f"removed {name}" in down.stdout, down.stderr


@pytest.mark.cgroup
def test_the_cpus_this_command_can_use_are_read_whatever_the_user_may_read(tmp_path, monkeypatch):
    """The capacity dilation is chosen for (cpulimit.cpu_capacity): this command's CPUs and its
    cgroup's quota; files or directories this user may not read count as no limit."""
    found = cpulimit.cpu_capacity()
    assert 0 < found.usable <= found.cpus <= len(cpulimit.host_cpus())
    root = tmp_path / "cgroup"
    job = root / "limited" / "job"
    job.mkdir(parents=True)
    (root / "cgroup.controllers").write_text("cpuset cpu\n")
    (root / "limited" / "cpu.max").write_text("50000 100000\n")
    (job / "cpu.max").write_text("max 100000\n")
    monkeypatch.setenv("SHOAL_CGROUP_ROOT", str(root))
    assert cpulimit.cpu_capacity("0::/limited/job\n").usable == 0.5
    (root / "limited" / "cpu.max").chmod(0)
    reads = os.geteuid() == 0  # root reads it all the same
    assert cpulimit.cpu_capacity("0::/limited/job\n").usable == (0.5 if reads else len(cpulimit.host_cpus()))
    (root / "limited").chmod(0)  # nor may it look inside
    try:
        assert cpulimit.cpu_capacity("0::/limited/job\n").usable == (0.5 if reads else len(cpulimit.host_cpus()))
    finally:
        (root / "limited").chmod(0o755)
