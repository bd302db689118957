"""Device memory held to its profile: fake cgroup trees shaped like the kernel's (v1, v2), and a
real device as root whose processes land in a memory cgroup with the limit."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from shoal import profiles
from shoal.cluster import cpulimit, inventory, memlimit, state
from shoal.cluster.emulated import EmulatedCluster

STB_B = 256 * 2**20
UNLIMITED_V1 = "9223372036854771712"  # what the kernel shows for no limit (a page-rounded max)


def _files(directory: Path, files: dict[str, str]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (directory / name).write_text(text)


def _v1_group(directory: Path) -> None:
    # The files a memory group of cgroup v1 has (those shoal reads or writes among them).
    _files(directory, {"cgroup.procs": "", "tasks": "", "memory.limit_in_bytes": UNLIMITED_V1,
                       "memory.memsw.limit_in_bytes": UNLIMITED_V1, "memory.usage_in_bytes": "0",
                       "memory.use_hierarchy": "1"})


def _v2_group(directory: Path, controllers: str, memory: bool) -> None:
    files = {"cgroup.procs": "", "cgroup.controllers": controllers, "cgroup.subtree_control": "",
             "cgroup.type": "domain", "cpu.max": "max 100000"}
    if memory:  # memory.* exist once the parent hands the controller down
        files.update({"memory.max": "max", "memory.swap.max": "max", "memory.current": "0"})
    _files(directory, files)


V1_SELF = "4:memory:/process_api/abc\n3:cpuset:/\n2:cpuacct:/\n1:cpu:/\n0::/\n"


def test_v1_groups_go_under_this_process_own_memory_group(tmp_path, monkeypatch):
    monkeypatch.setenv("SHOAL_CGROUP_ROOT", str(tmp_path))
    _v1_group(tmp_path / "memory")
    _v1_group(tmp_path / "memory" / "process_api" / "abc")
    own = tmp_path / "memory" / "process_api" / "abc"
    layout = memlimit.detect(cpulimit.CgroupLayout(1, tmp_path / "cpu" / "shoal", None), V1_SELF)
    assert (layout.version, layout.base) == (1, own)
    assert memlimit.paths(layout, "c1", "stb1") == [str(own / "shoal-c1" / "stb1"), str(own / "shoal-c1")]
    _v1_group(own / "shoal-c1" / "stb1")  # what the kernel's mkdir would hold
    group = memlimit.create(layout, "c1", "stb1", STB_B)
    assert group == str(own / "shoal-c1" / "stb1")
    assert (own / "shoal-c1" / "stb1" / "memory.limit_in_bytes").read_text() == str(STB_B)
    # mem+swap no higher than memory: the device never swaps.
    assert (own / "shoal-c1" / "stb1" / "memory.memsw.limit_in_bytes").read_text() == str(STB_B)
    assert memlimit.read_limit(group, 1) == STB_B
    # Nothing written above the process's own group.
    assert (tmp_path / "memory" / "memory.limit_in_bytes").read_text() == UNLIMITED_V1
    assert (own / "memory.limit_in_bytes").read_text() == UNLIMITED_V1


def test_v1_without_a_memory_hierarchy_or_own_group_limits_nothing_and_says_why(tmp_path, monkeypatch):
    monkeypatch.setenv("SHOAL_CGROUP_ROOT", str(tmp_path))
    cpu = cpulimit.CgroupLayout(1, tmp_path / "cpu" / "shoal", None)
    (tmp_path / "cpu").mkdir()
    layout = memlimit.detect(cpu, V1_SELF)
    assert layout.version == 0 and "no cgroup v1 memory hierarchy" in layout.why
    _v1_group(tmp_path / "memory")  # the hierarchy, but not the group this process is in
    layout = memlimit.detect(cpu, V1_SELF)
    assert layout.version == 0 and "process_api/abc" in layout.why
    assert layout.describe() == {"version": 0, "memory": None}


def test_v2_limits_the_device_group_and_hands_memory_down_to_it(tmp_path, monkeypatch):
    monkeypatch.setenv("SHOAL_CGROUP_ROOT", str(tmp_path))
    all_controllers = "cpuset cpu io memory hugetlb pids rdma misc"
    _v2_group(tmp_path, all_controllers, memory=False)
    for level in ("shoal", "shoal/c1"):
        _v2_group(tmp_path / level, "cpuset cpu", memory=False)
    _v2_group(tmp_path / "shoal/c1/stb1", "cpuset cpu", memory=True)
    cpu = cpulimit.CgroupLayout(2, tmp_path / "shoal", tmp_path / "shoal")
    layout = memlimit.detect(cpu)
    assert (layout.version, layout.base) == (2, tmp_path / "shoal")
    assert memlimit.paths(layout, "c1", "stb1") == []  # the CPU groups' device group holds it
    group = memlimit.create(layout, "c1", "stb1", STB_B)
    assert group == str(tmp_path / "shoal/c1/stb1")
    for level in ("", "shoal", "shoal/c1"):
        assert (tmp_path / level / "cgroup.subtree_control").read_text() == "+memory"
    assert (tmp_path / "shoal/c1/stb1/memory.max").read_text() == str(STB_B)
    assert (tmp_path / "shoal/c1/stb1/memory.swap.max").read_text() == "0"
    assert memlimit.read_limit(group, 2) == STB_B


def test_v2_where_memory_is_not_delegated_limits_nothing_and_says_why(tmp_path, monkeypatch):
    monkeypatch.setenv("SHOAL_CGROUP_ROOT", str(tmp_path))
    # A user's delegated group that was given cpu but not memory (systemd's default for users).
    user = tmp_path / "user.slice/user-1000.slice/user@1000.service/app.slice/run-u1.scope"
    _v2_group(tmp_path, "cpuset cpu io memory pids", memory=False)
    _v2_group(user, "cpu pids", memory=False)
    _v2_group(user / "shoal", "cpu", memory=False)
    layout = memlimit.detect(cpulimit.CgroupLayout(2, user / "shoal", None))
    assert layout.version == 0 and "memory controller is not delegated" in layout.why
    # No cgroup v2 group this user may divide at all.
    assert memlimit.detect(cpulimit.CgroupLayout(0, None, None)).version == 0


host_namespaces = pytest.mark.skipif(os.geteuid() != 0, reason="clusters in the host's namespaces need root; an ordinary user's device memory (held or said not held) is "
                                   "tests/user/test_as_ordinary_user.py::test_device_memory_is_held_to_its_profile_where_a_memory_cgroup_allows_and_said_where_not")

ALLOCATE = "import sys; b = bytearray(int(sys.argv[1]) * 2**20); b[::4096] = b'x' * len(b[::4096]); print('ok')"


@pytest.mark.netns
@host_namespaces
def test_a_devices_processes_live_in_a_memory_cgroup_with_its_profile_memory():
    stb = profiles.load()["stb"]
    with EmulatedCluster(inventory.from_emulate("1xstb"), calibrate=False) as emu:
        record = state.read(emu.id)
        memory = record["emulation"]["memory_limit"]
        assert memory["how"] == "cgroup", memory
        assert memory["limit_B"] == {"stb1": stb.memory_B} == {"stb1": STB_B}
        group = record["nodes"]["stb1"]["memory_cgroup"]
        # A process started in the device (as the MPI's launcher starts its daemon) is in it.
        own = emu.run_on("stb1", ["cat", "/proc/self/cgroup"], check=True).stdout
        if memory["version"] == 1:
            line = next(x for x in own.splitlines() if x.split(":")[1] == "memory")
            assert group.endswith(line.split(":", 2)[2]) and "/shoal-" in group
        else:
            assert group.endswith(own.strip().split("::", 1)[1].rsplit("/", 1)[0])
        assert memlimit.read_limit(group, memory["version"]) == STB_B
        # What fits the box runs; what does not is stopped by the kernel, not the host's memory.
        assert emu.run_on("stb1", [sys.executable, "-c", ALLOCATE, "64"], check=True).stdout.strip() == "ok"
        too_much = emu.run_on("stb1", [sys.executable, "-c", ALLOCATE, "320"])
        assert too_much.returncode == -9 and "ok" not in too_much.stdout  # SIGKILL
        events = Path(group, "memory.oom_control" if memory["version"] == 1 else "memory.events")
        kills = dict(line.split() for line in events.read_text().splitlines())
        assert int(kills["oom_kill"]) >= 1  # by the device's own limit
        groups = record["cgroups"]
    assert not [g for g in groups if os.path.exists(g)], "memory cgroups left behind"
