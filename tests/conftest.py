"""Shared fixtures: the MPIs every integration test runs under, and what each test needs.

A test that launches MPI ranks is marked ``mpi``, one that builds network namespaces
``netns``, one that runs only as root ``root`` (registered in pyproject.toml). Marks
come from the test's fixtures and from ``NEEDS`` below, by file or by test; `make
test-fast` runs what has none of them. Every session checks the marks it can see:
an unmarked test that launches ranks or brings emulated devices up in this process
fails and says where to mark it.

`make test` runs the tests in parallel processes (pytest-xdist). A test that times the
host is marked ``alone`` (``ALONE`` below): while it runs no other test does. One that
counts what the whole host holds (namespaces, cgroups, cluster records) is marked
``apart`` (``APART``): while it runs, only tests that make none of those (no ``mpi``,
``netns`` or ``root`` mark) run beside it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import pytest

from shoal import environment
from shoal.mpi import build, discover


def _find(kind: str):
    try:
        return discover.resolve(kind)
    except Exception as exc:  # surfaced as a test error, never a skip
        pytest.fail(f"{kind} is not installed in this environment ({exc}); run 'make setup'")


@pytest.fixture(scope="session")
def mpich():
    return _find("mpich")


@pytest.fixture(scope="session")
def openmpi():
    return _find("openmpi")


@pytest.fixture(scope="session", params=["mpich", "openmpi"])
def any_mpi(request):
    return _find(request.param)


#: Native builds persist across test sessions in the user's own shoal cache. A build's
#: key holds the MPI's identity and a hash of its sources and flags, and each build
#: renames a finished file into place, so sessions running at once share it safely.
NATIVE_CACHE = str(build.cache_root())


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    """Runs go to a temporary directory; native builds go to the persistent cache. The wait
    calibration a user stored there stays out of the tests: they run the fixed defaults
    (tests that calibrate say so and point the store elsewhere)."""
    monkeypatch.setenv("SHOAL_CACHE", NATIVE_CACHE)
    monkeypatch.setenv("SHOAL_RUNS", str(tmp_path_factory.getbasetemp() / "runs"))
    monkeypatch.setenv(environment.WAIT_CALIBRATION.name, "off")


TESTS = Path(__file__).resolve().parent
# Fixtures that give a test an MPI to launch.
MPI_FIXTURES = {"mpich", "openmpi", "any_mpi", "work_programs"}
# By file (relative to tests/) or by test (file::name, the parameters left out).
NEEDS: dict[str, tuple[str, ...]] = {
    "native/": ("mpi",),
    "wait/": ("mpi",),
    "user/": ("mpi", "netns"),
    "bench/test_bench_cli.py": ("mpi",),
    "bench/test_bench_cluster.py": ("mpi", "netns"),
    "cluster/test_concurrent.py": ("mpi", "netns"),
    "cluster/test_dilation.py": ("mpi", "netns"),
    "cluster/test_emulated.py": ("mpi", "netns"),
    "cluster/test_head_launch.py": ("mpi", "netns"),
    "cluster/test_host_loss.py": ("mpi", "netns"),
    "cluster/test_plantcast.py::test_every_byte_arrives_on_a_plant_that_loses_datagrams": ("mpi", "netns"),
    "cluster/test_kill_points.py": ("mpi", "netns"),
    "cluster/test_linkemu.py": ("mpi", "netns"),
    "cluster/test_multihost.py": ("netns",),
    "cluster/test_multihost_ssh.py": ("netns",),
    "cluster/test_multihost_user.py": ("netns", "mpi"),
    "cluster/test_slurm_hosts.py": ("netns",),
    "cluster/test_slurm_hosts.py::test_an_mpi_job_under_the_allocation_runs_across_both_hosts": ("mpi",),
    "cluster/test_userns.py": ("mpi", "netns"),
    "cluster/test_storage.py::test_rank_0_writes_the_image_to_the_head_through_its_link_and_every_byte_is_checked":
        ("mpi", "netns"),
    "cluster/test_os_noise.py::test_a_device_carries_its_os_noise_in_its_namespace_on_its_core": ("netns",),
    "cluster/test_background.py::test_a_device_decodes_on_its_first_core_and_the_stream_crosses_the_plant": ("mpi", "netns"),
    "cluster/test_background.py::test_an_upload_crosses_the_plants_upstream_to_the_head_end_from_the_devices_first_core": ("netns",),
    "cluster/test_inventory.py::test_cli_bad_inventory_is_one_line": ("netns",),
    "dsm/test_apps.py": ("mpi",),
    "dsm/test_cli.py": ("mpi",),
    "dsm/test_library.py": ("mpi",),
    "dsm/test_cluster_runs.py": ("mpi", "netns"),
    "study/test_study.py": ("mpi", "netns"),
    "sleep/test_in_device.py": ("netns",),
    "wait/test_across_devices.py": ("mpi", "netns"),
    "study/test_seed002_study.py": ("mpi", "netns"),
    "study/test_freqs_sweep.py": ("mpi", "netns"),
    "work/test_work_cli.py": ("mpi",),
    "power/test_httpmeter.py::test_a_named_meter_that_does_not_answer_is_refused_before_the_run": ("mpi",),
    "power/test_httpmeter.py::test_a_meter_that_fails_mid_sweep_is_a_warning_and_in_the_manifest": ("mpi",),
    "pallex/test_unprivileged.py": ("netns",),
    "pallex/test_upload_sink.py": ("netns",),
    "test_faults.py": ("mpi", "netns"),
    "test_job_stop.py": ("mpi", "netns"),
    "test_mpi_kinds.py::test_a_new_mpi_is_one_module": ("mpi",),
    "test_run_signals.py": ("mpi",),
    "test_user_tests_as_uid_65534.py": ("mpi", "netns"),
}


# Tests that time the host, by file or by test.
ALONE = {
    # Its refusals, its kill -9 and its power columns time nothing: they run beside others.
    **{f"cluster/test_linkemu.py::{name}": "times frames against the link's schedule" for name in (
        "test_mpi_traffic_keeps_the_link_schedule", "test_loss_drops_frames_at_the_links_rate",
        "test_a_shared_medium_serialises_every_devices_upstream_and_grants_idle_ones",
        "test_capped_devices_on_a_shared_medium_send_at_their_cap_side_by_side",
        "test_a_higher_priority_service_flow_is_served_first_on_a_busy_channel",
        "test_a_capped_device_holds_only_its_own_buffer_on_a_busy_shared_medium")},
    "wait/test_rhythm.py": "predicts arrivals from their timing",
    "native/test_bench_program.py::test_bandwidth_grows_with_message_size":
        "compares two bandwidths' medians (five test processes on two cores once reversed them)",
}
# Tests that count what the whole host holds, by file or by test.
APART = {
    "cluster/test_userns.py": "checks that nothing of its clusters is left anywhere the host can see",
    "cluster/test_slurm_hosts.py::test_down_leaves_nothing_even_with_a_job_running":
        "looks for Slurm and munge processes anywhere on the host",
    "cluster/test_slurm_hosts.py::test_a_set_whose_test_process_was_killed_is_removed_by_the_next":
        "leaves a Slurm for the next one to remove, which any other test's Slurm would remove first",
    "cluster/test_emulated.py::test_up_down_hostnames_and_nothing_in_root_namespace":
        "compares the host's whole list of links before and during",
    "cluster/test_emulated.py::test_kill_9_leftovers_are_removed_by_the_next_down":
        "leaves a cluster for its own `cluster down` to remove, which any other test's `cluster up` "
        "would remove first",
}
# What a test may make that an ``apart`` test counts.
MAKES = {"mpi", "netns", "root"}


def _needs(item: pytest.Item) -> set[str]:
    path = Path(str(item.fspath)).resolve().relative_to(TESTS).as_posix()
    name = item.name.split("[")[0]
    found = {"mpi"} if MPI_FIXTURES & set(item.fixturenames) else set()
    # A test skipped unless root says so in its reason.
    if any("root" in str(m.kwargs.get("reason", "")) for m in item.iter_markers("skipif")):
        found.add("root")
    for key in (path, f"{path}::{name}"):
        found.update(NEEDS.get(key, ()))
    for prefix, marks in NEEDS.items():
        if prefix.endswith("/") and path.startswith(prefix):
            found.update(marks)
    for mark, table in (("alone", ALONE), ("apart", APART)):
        if path in table or f"{path}::{name}" in table:
            found.add(mark)
    return found


# The file that runs tests/user as uid 65534.
USER_RUNS = "test_user_tests_as_uid_65534.py"
# The longest tests (a minute or more each, with their module's fixtures), longest first,
# started early so that they end with the rest rather than after it (the seed002 study,
# two and a half minutes, ended a run a minute after the rest when it started third).
LONGEST = ("study/test_seed002_study.py", USER_RUNS, "cluster/test_kill_points.py", "cluster/test_host_loss.py",
           "study/test_study.py", "cluster/test_emulated.py")


# Files whose module fixture is a whole study: their tests go to one process together
# (``--dist loadgroup``), or each process running one of them would run the study again
# (measured in one run: the seed002 study twice, 155 s and 145 s; test_study's three times).
WHOLE_RUN_FIXTURES = ("study/test_seed002_study.py", "study/test_study.py", "user/test_as_ordinary_user.py")


def _order(item: pytest.Item) -> tuple[int, int]:
    """In parallel runs the tests that run alone come first, one after another, while
    nothing long is running yet; then those that run apart, beside the tests that make
    nothing they count; then the longest; then the rest in file order."""
    marks = {m.name for m in item.iter_markers()}
    if "alone" in marks:
        return 0, 0
    if "apart" in marks:
        return 1, 0
    if not marks & MAKES:
        return 2, 0
    long = _longest(item.nodeid)
    return (3, long[0]) if long else (4, 0)


def _longest(nodeid: str) -> list[int]:
    """Where a test's file is in ``LONGEST`` (empty if it is not)."""
    path = nodeid.split("::")[0]
    return [i for i, name in enumerate(LONGEST) if path.endswith(name)]


def pytest_configure(config):
    # xdist would hand out its groups largest first, ahead of the order _order gives
    # (a whole study started before the alone tests, and they waited two minutes for it).
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False
    _enter_state_root(config)


#: The session's own state root (``SHOAL_STATE_DIR``): where the clusters the tests bring up
#: are recorded and the runs they write are registered (``shoal.runs.registry``), so that a
#: test's torn or interrupted run never lands in the registry of the user running the suite
#: (``shoal doctor`` listed nine of them after a session that used the host's). One for the
#: whole session, the xdist processes included (they share it as they shared the host's), made
#: by the session, or by the controller for its workers; every command a test starts inherits
#: it. The uid-65534 run of tests/user is a session of its own, with its own.
_state_root: dict[str, str | None] = {}


def _enter_state_root(config) -> None:
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None and "shoal_state_dir" in workerinput:
        path = workerinput["shoal_state_dir"]
    else:
        path = _state_root["made"] = tempfile.mkdtemp(prefix="shoal-tests-state-")
    _state_root["before"] = os.environ.get(environment.STATE_DIR.name)
    os.environ[environment.STATE_DIR.name] = path


def _leave_state_root() -> None:
    """Remove the root this session made, with what its tests left there (clusters whose
    owner is gone), unless a cluster is still up; then restore the variable."""
    made = _state_root.pop("made", None)
    if made is not None:
        from shoal.cluster import state

        try:
            state.reap()
            left = [record["id"] for record in state.records()]
        except Exception as exc:  # the session's outcome stands; say what stays
            left = [f"unread: {exc}"]
        if left:
            print(f"\nshoal tests: clusters still up ({', '.join(left)}) are recorded in {made}; "
                  f"SHOAL_STATE_DIR={made} shoal cluster down --all removes them", file=sys.stderr)
        else:
            shutil.rmtree(made, ignore_errors=True)
    if "before" in _state_root:
        before = _state_root.pop("before")
        if before is None:
            os.environ.pop(environment.STATE_DIR.name, None)
        else:
            os.environ[environment.STATE_DIR.name] = before


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadgroup`` handing a process its next test only when it starts one (xdist's
    own keeps two queued behind the one running, and tests queued behind a two-minute one
    waited for it while other processes had nothing left to run), and never one of the
    longest behind another (the two runs of tests/user, one behind the other in one
    process, ended a run a minute after the rest)."""
    from xdist.scheduler import LoadGroupScheduling

    if config.getvalue("dist") != "loadgroup" or not hasattr(LoadGroupScheduling, "_pending_of"):
        return None

    class OneAhead(LoadGroupScheduling):
        def _reschedule(self, node):
            # A process runs a test once it has the next (or is told to stop): one ahead.
            if self.workqueue and not node.shutting_down and self._pending_of(self.assigned_work[node]) >= 2:
                return
            super()._reschedule(node)

        def _assign_work_unit(self, node):
            def long(unit) -> bool:
                return any(_longest(nodeid) for nodeid in unit)

            pending = [nodeid for unit in self.assigned_work.get(node, {}).values()
                       for nodeid, done in unit.items() if not done]
            if long(pending):
                short = next((scope for scope, unit in self.workqueue.items() if not long(unit)), None)
                if short is not None:
                    self.workqueue.move_to_end(short, last=False)
            super()._assign_work_unit(node)

    return OneAhead(config, log)


def pytest_itemcollected(item):
    # Marked as soon as collected: xdist's own pytest_collection_modifyitems in each worker
    # (which may run before this file's) reads the group marks. The ``alone`` tests go to
    # one process, one after another, and so do the ``apart`` ones: spread over several,
    # each would wait for the others holding the gate, and no other test would start.
    path = item.nodeid.split("::")[0]
    if any(path.endswith(name) for name in WHOLE_RUN_FIXTURES):
        item.add_marker(pytest.mark.xdist_group(path))
    else:
        for mark in ("alone", "apart"):
            if mark in _needs(item):
                item.add_marker(pytest.mark.xdist_group(mark))


def pytest_collection_modifyitems(config, items):
    for item in items:
        for mark in sorted(_needs(item)):
            item.add_marker(mark)
    # As root, tests/user runs inside the uid-65534 tests, as the user it is written for;
    # run here as well, it would only repeat those paths with more rights.
    if os.geteuid() == 0 and any(i.nodeid.split("::")[0].endswith(USER_RUNS) for i in items):
        repeated = [i for i in items if Path(str(i.fspath)).resolve().is_relative_to(TESTS / "user")]
        if repeated:
            config.hook.pytest_deselected(items=repeated)
            left = {id(i) for i in repeated}
            items[:] = [i for i in items if id(i) not in left]
    items.sort(key=_order)


def _unmarked(what: str, mark: str, item: pytest.Item):
    def refuse(*args, **kwargs):
        pytest.fail(f"{item.nodeid} {what} but is not marked {mark!r}: add it to NEEDS in "
                    "tests/conftest.py", pytrace=False)
    return refuse


@pytest.fixture(autouse=True)
def _marks_hold(request, monkeypatch):
    """An unmarked test may not launch ranks or bring emulated devices up (in this process)."""
    marks = {m.name for m in request.node.iter_markers()}
    if "mpi" not in marks:
        from shoal.mpi import launch

        monkeypatch.setattr(launch.Job, "command", _unmarked("launches MPI ranks", "mpi", request.node))
    if "netns" not in marks:
        from shoal.cluster import emulated

        monkeypatch.setattr(emulated.EmulatedCluster, "up",
                            _unmarked("brings emulated devices up", "netns", request.node))


# The directory of the host lock's two files, made by the xdist controller for its workers.
_host_lock_dir: str | None = None


# The controller's exclusive lock on the start: the workers' tests other than ``alone`` ones
# wait for it, until the first ``alone`` test has the host (the workers start together, and
# another test taking its locks first would run while the whole ``alone`` phase waited).
_start: list = []


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    global _host_lock_dir
    if _host_lock_dir is None:
        _host_lock_dir = tempfile.mkdtemp(prefix="shoal-tests-")
        _start.append(open(Path(_host_lock_dir) / "start", "a"))
        fcntl.flock(_start[0], fcntl.LOCK_EX)
    node.workerinput["shoal_host_lock_dir"] = _host_lock_dir
    node.workerinput["shoal_state_dir"] = os.environ[environment.STATE_DIR.name]


def _let_start():
    while _start:
        _start.pop().close()


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node, ids):
    if not any(nodeid.endswith("@alone") for nodeid in ids):
        _let_start()


def pytest_runtest_logstart(nodeid, location):
    # In a worker this is after the test has its locks (pytest_runtest_protocol below).
    if nodeid.endswith("@alone"):
        _let_start()


def pytest_runtest_logreport(report):
    if report.nodeid.endswith("@alone"):  # also an alone test whose process crashed
        _let_start()


def pytest_unconfigure(config):
    _let_start()
    if _host_lock_dir and not hasattr(config, "workerinput"):
        shutil.rmtree(_host_lock_dir, ignore_errors=True)
    _leave_state_root()


def _wants(item: pytest.Item | None) -> dict[str, int]:
    """The locks a test takes, host first, and how."""
    if item is None:
        return {}
    marks = {m.name for m in item.iter_markers()}
    wants = {"host": fcntl.LOCK_EX if "alone" in marks else fcntl.LOCK_SH}
    if "apart" in marks or marks & MAKES:
        wants["clusters"] = fcntl.LOCK_EX if "apart" in marks else fcntl.LOCK_SH
    return wants


# The locks this process keeps for its next test: (what they are, their files).
_kept: list = []
# Whether this process has seen the start open.
_started: list = []


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    """Under xdist, two readers-writer locks on files the run's workers share: ``host``,
    which an ``alone`` test holds exclusively and every other test shares, and
    ``clusters``, which an ``apart`` test holds exclusively and every test that may make
    what it counts shares. A test waiting for an exclusive lock holds the gate, so no new
    test starts until it has run; one waiting for a shared lock waits without it (holding
    the gate, a test that makes ranks behind a minute-long ``apart`` test stopped every
    other process for that minute). A test that holds an exclusive lock keeps its locks for
    the next test of its process when that one wants the same: the ``alone`` tests, one
    after another in one process, hold the host from the first to the last, and no test
    slips in between them (a process that keeps its locks takes no others, so no two
    processes wait for each other). Outermost, so that the wait counts against no test's
    timeout."""
    asked = time.time()
    workerinput = getattr(item.config, "workerinput", None)
    if workerinput is None:
        cpu = _cpu_s()
        yield
        _timeline(item, asked, asked, cpu)
        return
    shared = Path(workerinput["shoal_host_lock_dir"])
    wants = _wants(item)
    if not _started and "alone" not in {m.name for m in item.iter_markers()}:
        with open(shared / "start", "a") as start:
            fcntl.flock(start, fcntl.LOCK_SH)
        _started.append(True)
    kept, files = _kept.pop() if _kept else ({}, {})
    if kept != wants:
        for fh in files.values():
            fh.close()
        files = {}
    take = [] if files else list(wants.items())  # kept locks are all it wants, or none
    exclusive = any(mode == fcntl.LOCK_EX for _, mode in take)
    try:
        waiting = []
        with open(shared / "gate", "a") if take else contextlib.nullcontext() as gate:
            if take:  # (kept locks take no gate: its holder may be waiting for them)
                fcntl.flock(gate, fcntl.LOCK_EX)
            try:
                for name, mode in take:  # always host, then clusters
                    fh = files[name] = open(shared / name, "a")
                    if exclusive:
                        fcntl.flock(fh, mode)
                    else:
                        try:
                            fcntl.flock(fh, mode | fcntl.LOCK_NB)
                        except BlockingIOError:
                            waiting.append((fh, mode))
            finally:
                if take:
                    fcntl.flock(gate, fcntl.LOCK_UN)
        # A shared lock that an exclusive test holds is waited for without the gate: the
        # tests that need neither lock (the pure ones) go on starting meanwhile.
        for fh, mode in waiting:
            fcntl.flock(fh, mode)
        locked, cpu = time.time(), _cpu_s()
        yield
    finally:
        if fcntl.LOCK_EX in wants.values() and _wants(nextitem) == wants:
            _kept.append((wants, files))
        else:
            for fh in files.values():
                fh.close()  # closing releases its lock
    _timeline(item, asked, locked, cpu)


#: With SHOAL_TEST_TIMELINE=FILE each test appends a line of JSON to FILE: its process,
#: when it asked for its locks, when it had them, when it ended, each phase's outcome and the
#: CPU seconds it took (its process's and those of the processes it waited for: a helper a
#: test leaves to its cluster's teardown is counted by nobody).
TIMELINE = os.environ.get("SHOAL_TEST_TIMELINE")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    report = (yield).get_result()
    if TIMELINE:
        item.__dict__.setdefault("_shoal_phases", {})[report.when] = [report.outcome,
                                                                     round(report.duration, 3)]


def _cpu_s() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def _timeline(item: pytest.Item, asked: float, locked: float, cpu: float):
    if not TIMELINE:
        return
    line = {"worker": os.environ.get("PYTEST_XDIST_WORKER", "-"), "test": item.nodeid,
            "marks": sorted({m.name for m in item.iter_markers()} & (MAKES | {"alone", "apart"})),
            "asked": round(asked, 3), "locked": round(locked, 3), "end": round(time.time(), 3),
            "cpu_s": round(_cpu_s() - cpu, 3), "phases": item.__dict__.get("_shoal_phases", {})}
    with open(TIMELINE, "a") as out:  # one write of a short line: the processes' lines stay whole
        out.write(json.dumps(line) + "\n")
