"""The utilisation model against known utilisation in fake /proc and cgroups."""

from __future__ import annotations

import pytest

from shoal.errors import ShoalError
from shoal.power import spec
from shoal.power.base import SourceUnavailable
from shoal.power.model import ModelSource


def _read_after(source, seconds):
    """The model's reading ``seconds`` after its last one, on its own clock (the host's clock
    between two calls would add however long a loaded host kept the test from running)."""
    return source._read_at(source._prev_t + seconds)


def test_proc_stat_utilisation_gives_linear_power(kernel):
    kernel.proc_stat(user=100, system=0, idle=900, steal=50)
    model = ModelSource(2.0, 6.0)
    assert model.channels[0].kind == "modelled"
    # next interval: 300 busy jiffies (user+system+irq+softirq) of 400 (idle+iowait count; steal does not)
    kernel.proc_stat(user=300, system=50, irq=25, softirq=25, idle=980, iowait=20, steal=500)
    (energy,) = _read_after(model, 2.0)
    u = 0.75
    assert energy == pytest.approx((2.0 + u * 4.0) * 2.0, rel=1e-3)
    # idle interval: exactly idle power
    kernel.proc_stat(user=300, system=50, irq=25, softirq=25, idle=1380, iowait=20, steal=500)
    (energy2,) = _read_after(model, 1.0)
    assert energy2 - energy == pytest.approx(2.0, rel=1e-3)
    assert model.power_at(0.0) == 2.0 and model.power_at(1.0) == 6.0 and model.power_at(7.0) == 6.0


def test_cgroup_v2_usage_with_device_cores(kernel):
    kernel.proc_stat(user=1, idle=1)
    group = kernel.sys / "fs" / "cgroup" / "shoal" / "dev0"
    group.mkdir(parents=True)
    (group / "cpu.stat").write_text("usage_usec 1000000\nuser_usec 800000\nsystem_usec 200000\n")
    model = ModelSource(1.0, 3.0, cores=2, cgroup="shoal/dev0")
    assert "v2" in model.describe
    (group / "cpu.stat").write_text("usage_usec 2000000\nuser_usec 1800000\nsystem_usec 200000\n")
    (energy,) = _read_after(model, 1.0)
    # 1 s of CPU over 1 s on 2 cores: u = 0.5
    assert energy == pytest.approx(2.0, rel=2e-3)


def test_cgroup_v1_cpuacct_usage_in_nanoseconds(kernel):
    kernel.proc_stat(user=1, idle=1)
    group = kernel.sys / "fs" / "cgroup" / "cpuacct" / "shoal" / "dev1"
    group.mkdir(parents=True)
    (group / "cpuacct.usage").write_text("5000000000\n")
    model = ModelSource(1.0, 3.0, cores=1, cgroup="shoal/dev1")
    assert "v1" in model.describe
    (group / "cpuacct.usage").write_text("5250000000\n")
    assert _read_after(model, 1.0)[0] == pytest.approx(1.5, rel=2e-3)


def test_missing_cgroup_is_a_clear_error(kernel):
    kernel.proc_stat(user=1, idle=1)
    with pytest.raises(ShoalError, match="cgroup 'nope' not found"):
        spec.build(spec.parse("model:1,2,cgroup=nope"))


def test_link_energy_per_byte(kernel):
    kernel.proc_stat(user=0, idle=100)
    kernel.net_dev({"lo": (999, 999), "veth0": (1000, 2000)})
    model = ModelSource(1.0, 2.0, link_J_per_B=1e-6)
    assert [c.domain for c in model.channels] == ["board", "link"]
    kernel.net_dev({"lo": (5000, 5000), "veth0": (11000, 22000)})
    kernel.proc_stat(user=0, idle=200)
    cpu, link = model.read()
    assert link == pytest.approx(30000 * 1e-6)  # loopback bytes do not count


def test_bad_numbers_and_unreadable_stat(kernel):
    with pytest.raises(SourceUnavailable, match="cannot read CPU utilisation"):
        ModelSource(1.0, 2.0)
    kernel.proc_stat(user=1, idle=1)
    with pytest.raises(SourceUnavailable, match="idle_W <= busy_W"):
        ModelSource(3.0, 2.0)
