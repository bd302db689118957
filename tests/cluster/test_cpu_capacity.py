"""The CPUs a command can use inside a CPU-limited cgroup (a container held to `docker --cpus`,
a slice with CPUQuota=): fake cgroup trees shaped like the kernel's (v1, v2), the reserve kept
for the host, where device groups go when the command's own group is limited, and one real
cgroup as root with a quota that a child process reads from inside."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from shoal.cluster import cpulimit, dilation, hostspeed, inventory, state
from shoal.cluster.emulated import EmulatedCluster
from shoal.errors import ShoalError

UNLIMITED_V1 = "-1"


def _files(directory: Path, files: dict[str, str]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (directory / name).write_text(text)


def _v1_cpu(directory: Path, quota: str = UNLIMITED_V1, period: str = "100000") -> None:
    # The files of a v1 cpu group that shoal reads or writes.
    _files(directory, {"cgroup.procs": "", "tasks": "", "cpu.cfs_quota_us": quota,
                       "cpu.cfs_period_us": period, "cpu.shares": "1024", "cpu.stat": ""})


def _v1_cpuset(directory: Path, cpus: str) -> None:
    _files(directory, {"cgroup.procs": "", "cpuset.cpus": cpus, "cpuset.effective_cpus": cpus,
                       "cpuset.mems": "0"})


def _v2(directory: Path, cpu_max: str | None = "max 100000", cpus: str | None = None,
        controllers: str = "cpuset cpu io memory pids") -> None:
    files = {"cgroup.procs": "", "cgroup.controllers": controllers, "cgroup.subtree_control": "",
             "cgroup.type": "domain"}
    if cpu_max is not None:  # the root group has no cpu.max
        files["cpu.max"] = cpu_max
    if cpus is not None:
        files["cpuset.cpus.effective"] = cpus
    _files(directory, files)


def _v1_tree(root: Path) -> None:
    _v1_cpu(root / "cpu")
    _v1_cpuset(root / "cpuset", "0-63")
    (root / "cpuacct").mkdir()


V1_SELF = "5:memory:/\n4:cpuset:/\n3:cpuacct:/{path}\n2:cpu:/{path}\n0::/\n"
V2_SELF = "0::/{path}\n"


@pytest.fixture
def fake_root(tmp_path, monkeypatch):
    monkeypatch.setenv("SHOAL_CGROUP_ROOT", str(tmp_path))
    return tmp_path


@pytest.fixture
def four_cpus(monkeypatch):
    monkeypatch.setattr(cpulimit, "host_cpus", lambda: [0, 1, 2, 3])


# -- the capacity: v1 ---------------------------------------------------------------------------

def test_v1_quota_on_the_own_group_is_the_capacity(fake_root, four_cpus):
    _v1_tree(fake_root)
    _v1_cpu(fake_root / "cpu/docker/abc", "50000", "100000")  # docker --cpus 0.5
    found = cpulimit.cpu_capacity(V1_SELF.format(path="docker/abc"))
    assert (found.cpus, found.quota_cpus, found.usable) == (4, 0.5, 0.5)
    assert found.limited_by == str(fake_root / "cpu/docker/abc")
    assert found.describe() == {"cpus": 4, "capacity": 0.5, "quota_cpus": 0.5,
                                "limited_by": str(fake_root / "cpu/docker/abc")}


def test_v1_the_tightest_quota_of_an_ancestor_holds(fake_root, four_cpus):
    _v1_tree(fake_root)
    _v1_cpu(fake_root / "cpu/limited", "150000", "100000")       # 1.5 CPUs
    _v1_cpu(fake_root / "cpu/limited/job", "400000", "200000")  # 2 CPUs: looser than its parent
    _v1_cpu(fake_root / "cpu/limited/job/step")
    found = cpulimit.cpu_capacity(V1_SELF.format(path="limited/job/step"))
    assert found.usable == 1.5 and found.limited_by == str(fake_root / "cpu/limited")
    assert found.own == str(fake_root / "cpu/limited/job/step")


def test_v1_without_a_quota_the_affinity_is_the_capacity(fake_root, four_cpus):
    _v1_tree(fake_root)
    _v1_cpu(fake_root / "cpu/user.slice")
    found = cpulimit.cpu_capacity(V1_SELF.format(path="user.slice"))
    assert (found.usable, found.quota_cpus, found.limited_by) == (4.0, None, None)


def test_v1_a_quota_larger_than_the_cpus_leaves_the_cpus(fake_root, four_cpus):
    _v1_tree(fake_root)
    _v1_cpu(fake_root / "cpu/big", "800000", "100000")
    assert cpulimit.cpu_capacity(V1_SELF.format(path="big")).usable == 4.0


def test_v1_a_cpuset_narrower_than_the_affinity_counts(fake_root, four_cpus):
    _v1_tree(fake_root)
    _v1_cpuset(fake_root / "cpuset/pinned", "2-3")
    found = cpulimit.cpu_capacity("4:cpuset:/pinned\n2:cpu:/\n")
    assert (found.cpus, found.usable) == (2, 2.0)


def test_v1_in_a_container_the_mount_is_its_own_limited_group(fake_root, four_cpus):
    # Docker on v1 mounts the container's own group at /sys/fs/cgroup/cpu; /proc/self/cgroup
    # still names the host's path, which does not exist inside.
    _v1_cpu(fake_root / "cpu", "100000", "100000")
    _v1_cpuset(fake_root / "cpuset", "0-3")
    found = cpulimit.cpu_capacity(V1_SELF.format(path="docker/0123abcd"))
    assert (found.usable, found.limited_by, found.own) == (1.0, str(fake_root / "cpu"),
                                                           str(fake_root / "cpu"))


# -- the capacity: v2 ---------------------------------------------------------------------------

def test_v2_quota_on_the_own_group_and_at_an_ancestor(fake_root, four_cpus):
    _v2(fake_root, cpu_max=None, cpus="0-3")
    _v2(fake_root / "system.slice", "200000 100000")
    _v2(fake_root / "system.slice/shoal.service", "50000 100000", cpus="0-3")
    found = cpulimit.cpu_capacity(V2_SELF.format(path="system.slice/shoal.service"))
    assert (found.usable, found.version) == (0.5, 2)
    assert found.limited_by == str(fake_root / "system.slice/shoal.service")
    # The ancestor's quota tighter than the own group's.
    (fake_root / "system.slice/cpu.max").write_text("25000 100000\n")
    assert cpulimit.cpu_capacity(V2_SELF.format(path="system.slice/shoal.service")).usable == 0.25


def test_v2_unlimited_and_a_narrow_cpuset(fake_root, four_cpus):
    _v2(fake_root, cpu_max=None, cpus="0-3")
    _v2(fake_root / "user.slice", cpus="0-3")
    _v2(fake_root / "user.slice/session-1.scope", cpus="1")
    found = cpulimit.cpu_capacity(V2_SELF.format(path="user.slice/session-1.scope"))
    assert (found.cpus, found.quota_cpus, found.usable) == (1, None, 1.0)


def test_v2_a_container_namespace_root_with_cpu_max(fake_root, four_cpus):
    # A container with a cgroup namespace: its group is the mount's root, with a cpu.max.
    _v2(fake_root, "100000 100000", cpus="0-3")
    found = cpulimit.cpu_capacity("0::/\n")
    assert (found.usable, found.limited_by) == (1.0, str(fake_root))


def test_unreadable_missing_or_odd_files_count_as_no_limit(fake_root, four_cpus):
    _v2(fake_root, cpu_max=None)
    _v2(fake_root / "a", cpu_max="garbage")
    _v2(fake_root / "a/b", cpu_max=None)
    (fake_root / "a/b/cpu.max").mkdir()  # reading it fails, as an unreadable file does
    assert cpulimit.cpu_capacity(V2_SELF.format(path="a/b")).usable == 4.0
    assert cpulimit.cpu_capacity("not a cgroup line\n").usable == 4.0
    # No hierarchy at all.
    for child in list(fake_root.iterdir()):
        os.rename(child, fake_root.parent / f"{fake_root.name}-{child.name}")
    assert cpulimit.cpu_capacity(V2_SELF.format(path="a/b")).usable == 4.0


def test_this_host_capacity_is_at_most_its_cpus():
    found = cpulimit.cpu_capacity()
    assert 0 < found.usable <= found.cpus <= len(cpulimit.host_cpus())
    assert cpulimit.capacity() == found.usable


# -- the reserve and the dilation ---------------------------------------------------------------

def test_the_reserve_is_half_a_cpu_from_two_cpus_a_quarter_of_less_and_never_below_a_quarter_cpu():
    assert dilation.reserve(2) == dilation.reserve(64) == 0.5
    assert dilation.reserve(1.5) == 0.375 and dilation.reserve(1) == 0.25
    # A 0.5-CPU container keeps a quarter CPU; below that, half of what there is.
    assert dilation.reserve(0.5) == 0.25 and dilation.reserve(0.3) == 0.15
    # Four MinnowBoards (2 CPUs at real time): two host CPUs keep 1.5 for them (D = 2), a
    # 1-CPU container 0.75 (D = 3), a 0.5-CPU one 0.25 (D = 8): it still runs.
    assert [dilation.choose([0.5] * 4, c) for c in (2, 1, 0.5)] == [2, 3, 8]
    assert dilation.needed([0.5] * 4, 0.5) == pytest.approx(2 / 0.25)
    # A reserve given explicitly still holds.
    assert dilation.choose([0.5] * 4, 2, reserve_cpus=1.0) == 2
    with pytest.raises(ShoalError, match="leaves nothing"):
        dilation.choose([1.0], 0)


@pytest.mark.parametrize("quota, expected", [("50000 100000", 8), ("100000 100000", 3), ("max 100000", None)])
def test_the_automatic_dilation_fits_the_capacity_of_the_commands_own_cgroup(fake_root, quota, expected):
    _v2(fake_root, quota)  # the whole mount is this command's (limited) group, as in a container
    # Host cores as fast as the reference core: a MinnowBoard core is then a quarter of one.
    emu = EmulatedCluster(inventory.from_emulate("4xminnowboard"), host=hostspeed.HostSpeed.asked(1.0))
    assert [b for _, b in emu._budgets().values()] == [0.5] * 4
    d = emu.choose_dilation()
    capacity = cpulimit.cpu_capacity()
    assert emu.cpu_capacity == capacity
    if expected is None:
        assert d == dilation.choose([0.5] * 4, len(cpulimit.host_cpus()))
    else:
        assert d == expected
        assert f"fit {capacity.usable:g} CPUs less {dilation.reserve(capacity.usable):g}" in emu.dilation_reason


# -- where device groups go ---------------------------------------------------------------------

@pytest.fixture
def as_root(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 0)


def test_v1_device_groups_go_beneath_a_limited_own_group_and_go_with_the_cluster(fake_root, as_root):
    _v1_tree(fake_root)
    own = fake_root / "cpu/system.slice/job.service"
    _v1_cpu(fake_root / "cpu/system.slice")
    _v1_cpu(own, "50000", "100000")
    layout = cpulimit.detect(V1_SELF.format(path="system.slice/job.service"))
    assert (layout.version, layout.cpu_base, layout.within) == (1, own / "shoal", own)
    assert layout.cpuset_base == fake_root / "cpuset/shoal"  # the own cpuset group: the root's
    planned = cpulimit.paths(layout, "c1", "dev1", 2, [0, 1])
    assert str(own / "shoal/c1/dev1/core0") in planned.cores[0]
    # The cluster's record names shoal's level in the own group (removed last), never the
    # own group itself, which holds the command.
    order = planned.all()
    assert str(own) not in order
    assert all(order.index(g) < order.index(str(own / "shoal"))
               for g in order if g.startswith(str(own / "shoal") + "/"))
    made = cpulimit.create(layout, "c1", "dev1", 0.125, 2, [0, 1], pinned=True)
    assert (own / "shoal/c1/dev1/core1/cpu.cfs_quota_us").read_text() == str(made.quota_us)
    assert not (fake_root / "cpu/shoal").exists()
    # The same process in an unlimited group: the hierarchy's root, as before.
    (own / "cpu.cfs_quota_us").write_text(UNLIMITED_V1)
    layout = cpulimit.detect(V1_SELF.format(path="system.slice/job.service"))
    assert (layout.cpu_base, layout.within) == (fake_root / "cpu/shoal", None)
    assert str(fake_root / "cpu/shoal") not in cpulimit.paths(layout, "c1", "dev1", 2, [0, 1]).all()


def test_v1_a_limited_container_mount_keeps_groups_at_the_mount(fake_root, as_root):
    _v1_cpu(fake_root / "cpu", "100000", "100000")
    _v1_cpuset(fake_root / "cpuset", "0-3")
    layout = cpulimit.detect(V1_SELF.format(path="docker/0123abcd"))
    assert (layout.cpu_base, layout.within) == (fake_root / "cpu/shoal", None)


def test_v2_device_groups_go_beneath_a_limited_own_group_which_the_command_leaves(fake_root, as_root):
    _v2(fake_root, cpu_max=None)
    _v2(fake_root / "system.slice", controllers="cpuset cpu memory pids")
    own = fake_root / "system.slice/job.service"
    _v2(own, "50000 100000", controllers="cpuset cpu memory pids")
    (own / "cgroup.procs").write_text(f"{os.getpid()}\n")
    layout = cpulimit.detect(V2_SELF.format(path="system.slice/job.service"))
    assert (layout.version, layout.cpu_base, layout.within) == (2, own / "shoal", own)
    for level in ("shoal", "shoal/c1", "shoal/c1/dev1"):  # what the kernel's mkdir would hold
        _v2(own / level, controllers="cpuset cpu")
    cpulimit.create(layout, "c1", "dev1", 0.25, 1, [0], pinned=True)
    # No internal processes: the command moved into a leaf beside shoal's group, which the
    # own group then hands cpu and cpuset to.
    assert (own / "command/cgroup.procs").read_text() == str(os.getpid())
    assert (own / "cgroup.subtree_control").read_text() == "+cpu +cpuset"
    assert (own / "shoal/c1/dev1/core0/cpu.max").read_text().startswith("2500 ")
    assert str(own / "shoal") in cpulimit.paths(layout, "c1", "dev1", 1, [0]).all()
    assert str(own / "command") not in cpulimit.paths(layout, "c1", "dev1", 1, [0]).all()


def test_v2_a_limited_container_root_is_left_by_the_command_too(fake_root, as_root):
    _v2(fake_root, "100000 100000", controllers="cpuset cpu memory pids")
    (fake_root / "cgroup.procs").write_text("1\n")
    layout = cpulimit.detect("0::/\n")
    assert (layout.cpu_base, layout.within) == (fake_root / "shoal", fake_root)
    # Unlimited, the container's root still holds its processes: they leave it all the same.
    (fake_root / "cpu.max").write_text("max 100000\n")
    layout = cpulimit.detect("0::/\n")
    assert (layout.cpu_base, layout.within) == (fake_root / "shoal", fake_root)
    _v2(fake_root / "shoal", controllers="cpuset cpu")
    _v2(fake_root / "shoal/c1", controllers="cpuset cpu")
    cpulimit.create_host_group(layout, "c1", "head")
    assert (fake_root / "command/cgroup.procs").read_text() == "1"
    # The host's own root (no cpu.max): nothing moves, as before.
    (fake_root / "cpu.max").unlink()
    assert cpulimit.detect("0::/\n").within is None


def test_v2_delegated_devices_stay_beneath_a_limited_scope(fake_root, monkeypatch):
    """A user's scope with CPUQuota= (systemd-run --user --scope -p CPUQuota=50%): the devices
    go under the scope itself, not its parent, whose groups the quota would not hold."""
    monkeypatch.delenv(cpulimit.DELEGATED, raising=False)
    _v2(fake_root, cpu_max=None)
    app = fake_root / "user.slice/user-1000.slice/user@1000.service/app.slice"
    _v2(app, controllers="cpu pids")
    scope = app / "run-u7.scope"
    _v2(scope, "50000 100000", controllers="cpu pids")
    for group in (scope / "shoal", app / "shoal"):  # what the kernel's mkdir would hold
        _v2(group, controllers="cpu")
    assert cpulimit.prepare_delegated(V2_SELF.format(path=scope.relative_to(fake_root)))
    assert os.environ[cpulimit.DELEGATED] == str(scope / "shoal")
    assert (scope / "command/cgroup.procs").read_text() == str(os.getpid())
    assert (scope / "cgroup.subtree_control").read_text() == "+cpu"
    assert (app / "cgroup.subtree_control").read_text() == ""  # the parent left alone
    # Unlimited, the parent is used, as before.
    monkeypatch.delenv(cpulimit.DELEGATED)
    (scope / "cpu.max").write_text("max 100000\n")
    assert cpulimit.prepare_delegated(V2_SELF.format(path=scope.relative_to(fake_root)))
    assert os.environ[cpulimit.DELEGATED] == str(app / "shoal")
    monkeypatch.delenv(cpulimit.DELEGATED)


def test_removing_a_cluster_leaves_shoals_level_while_another_cluster_is_in_it(tmp_path, monkeypatch):
    monkeypatch.setenv("SHOAL_STATE_DIR", str(tmp_path / "state"))
    own = tmp_path / "cpu/job.service"
    for group in ("shoal/c1/dev1", "shoal/c2/dev1"):
        (own / group).mkdir(parents=True)
    record = {"id": "c1", "netns": [], "uts": [],
              "cgroups": [str(own / "shoal/c1/dev1"), str(own / "shoal/c1"), str(own / "shoal")]}
    state.remove(record)
    assert not (own / "shoal/c1").exists() and (own / "shoal/c2/dev1").exists()
    record["id"], record["cgroups"] = "c2", [str(own / "shoal/c2/dev1"), str(own / "shoal/c2"),
                                             str(own / "shoal")]
    state.remove(record)
    assert not (own / "shoal").exists() and own.exists()


# -- a real cgroup, as root ---------------------------------------------------------------------

_READ_INSIDE = ("import sys\nfrom shoal.cluster import cpulimit\n"
                "c = cpulimit.cpu_capacity(); layout = cpulimit.detect()\n"
                "print(c.usable, c.limited_by, layout.within)\n")


def _real_limited_group() -> tuple[Path, str, int] | None:
    """(a new cgroup at half a CPU, the file its processes are written to, its version)."""
    root = Path("/sys/fs/cgroup")
    name = f"captest-{os.getpid()}"
    if (root / "cgroup.controllers").exists():
        if "cpu" not in (root / "cgroup.subtree_control").read_text().split():
            return None
        group = root / name
        group.mkdir()
        (group / "cpu.max").write_text("50000 100000")
        return group, "cgroup.procs", 2
    if (root / "cpu/cpu.cfs_quota_us").exists():
        group = root / "cpu" / name
        group.mkdir()
        (group / "cpu.cfs_period_us").write_text("100000")
        (group / "cpu.cfs_quota_us").write_text("50000")
        return group, "cgroup.procs", 1
    return None


@pytest.mark.skipif(os.geteuid() != 0, reason="making a cgroup with a CPU quota needs root; what an "
                    "ordinary user reads (unreadable and missing files) is tested on fake trees: "
                    "test_unreadable_missing_or_odd_files_count_as_no_limit")
def test_a_process_in_a_real_half_cpu_cgroup_reads_half_a_cpu(monkeypatch):
    monkeypatch.delenv("SHOAL_CGROUP_ROOT", raising=False)
    made = _real_limited_group()
    # As root, emulated devices need a cpu controller: a host without one fails here, it is not skipped.
    assert made is not None, "no cgroup cpu controller mounted: emulated devices cannot be held to their speed"
    group, procs, _ = made
    try:
        # The child joins the group before Python starts, so everything it reads is from inside.
        child = subprocess.run(["sh", "-c", f'echo $$ > {group / procs} && exec "$@"', "sh",
                                sys.executable, "-c", _READ_INSIDE],
                               capture_output=True, text=True, timeout=60)
        assert child.returncode == 0, child.stderr
        usable, limited_by, within = child.stdout.split()
        assert (float(usable), limited_by, within) == (0.5, str(group), str(group))
    finally:
        for _ in range(100):
            try:
                group.rmdir()
                break
            except FileNotFoundError:
                break
            except OSError:  # the child's exit is still being accounted
                import time
                time.sleep(0.05)
    assert not group.exists()


def test_doctor_names_the_capacity_and_the_quota_that_sets_it(fake_root, monkeypatch):
    from shoal import doctor

    _v2(fake_root, "50000 100000")  # a container held to half a CPU
    monkeypatch.setattr(cpulimit, "host_cpus", lambda: [0, 1])
    finding = doctor.check_cpu_capacity()
    assert finding.ok and finding.found == f"0.5 CPUs for emulated devices (of 2: the CPU quota of {fake_root})"
    (fake_root / "cpu.max").write_text("max 100000\n")
    assert doctor.check_cpu_capacity().found == "2 CPUs for emulated devices"
