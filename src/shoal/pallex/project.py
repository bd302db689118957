"""Carry a cycle measured on this machine over to a device, from its boot and device profiles.

Per stage, the run gives the work time (spawn to work done, less the time
spent waiting for inputs) and the CPU seconds (wait4). On the device the
waiting part stays and the CPU part scales by host_speed / device speed
(the speeds of shoal's device profiles, relative to the reference core):

    d(s) = max(0, work - cpu) + cpu x host_speed / speed + network bytes x 8 / link rate

(the stage's network traffic went over loopback here; on the device it
crosses the device's link: Wi-Fi in seed 004's upload scenarios), plus, where
the boot profile gives the storage's read rate R, the time to read what the
stage loads on a cold start (storage.py): each package or file once per
cycle, by the stage that starts first, at R/2 while the unit configuration's
own initialisation still reads the card (Pallex, before T_usi) and at R after.

The device's schedule is the earliest-start schedule (schedule.py) with the
stages' units ready at the boot profile's times (Pallex) or every stage held
until userspace is done (baseline: the application started from rc.local),
where "userspace done" T_u is the unit configuration's T_usi, or later if a
stage's unit comes later. Energy, all modelled and labelled so:

    E = E_btl+knl + P_usi x min(T_end, T_u) + E_after + E_sdn
    E_after = idle_W x max(0, T_end - T_u) + (busy_W - idle_W) x cpu_after / cores

CPU work during userspace initialisation costs nothing extra: the tables put
P_usi at 96 % (RPi3) and 100 % (RPi Zero W) of busy_W already. Where the
boot profile says userspace initialisation keeps a share c of the cores busy
(the Zero W: c = 1), a Pallex stage's CPU work inside that window gets
r = min(1, max(cores x (1 - c), 1/2)) of a core (1/2: the fair share of one
core against initialisation), and initialisation is delayed by c times the
CPU seconds the stages took inside it:

    d'(s) = wait + cpu x (f / r + 1 - f),   f = part of s inside [0, T_u)
    T_u'  = T_u + c x sum of cpu x f
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from shoal.pallex import schedule
from shoal.profiles import BootPhases, DeviceProfile
from shoal.pallex.runner import CycleResult
from shoal.pallex.stagefile import App
from shoal.power.model import linear_energy_J


@dataclass(frozen=True)
class StageDemand:
    """What a stage needs on the device: seconds of work, of those CPU seconds, and network bytes."""

    work_s: float
    cpu_s: float
    network_B: int = 0
    # What the stage loads from storage on a cold start: package or file -> bytes (storage.py).
    loaded: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Projection:
    mode: str
    userspace_end_s: float  # T_u, after the kernel phase
    app_end_s: float  # after the kernel phase
    duration_s: float  # power-on to power-off
    post_kernel_s: float  # the part Pallex changes: userspace + application
    energy_J: float
    post_kernel_J: float
    storage_B: dict  # stage -> bytes read from storage in the cycle
    plan: dict  # stage -> (start, finish) after the kernel phase

    def describe(self) -> dict:
        return asdict(self)


def demands(result: CycleResult) -> dict[str, StageDemand]:
    """Work and CPU seconds of each stage of a measured cycle (this machine)."""
    out = {}
    for name, rec in result.stages.items():
        rep = rec.report
        if rec.start_s is None or not rep or rep.get("t_work_done") is None:
            raise ValueError(f"stage {name} did not finish its work ({rec.status}: {rec.reason})")
        spawn_wall = result.t0_wall + rec.start_s
        waited = (rep["t_inputs"] - rep["t_start"]) if rep.get("t_inputs") else 0.0
        work = max(0.0, rep["t_work_done"] - spawn_wall - waited)
        cpu = max(0.0, (rec.cpu_s or 0.0) - rep.get("stand_in_cpu_s", 0.0))
        out[name] = StageDemand(work, min(cpu, work), int(rep.get("network_bytes", 0)),
                                dict(rep.get("storage_loaded") or {}))
    return out


def device_durations(dem: dict[str, StageDemand], speed: float, host_speed: float = 1.0,
                     link_bps: float | None = None) -> dict[str, float]:
    net = (lambda d: d.network_B * 8.0 / link_bps) if link_bps else (lambda d: 0.0)
    return {s: max(0.0, d.work_s - d.cpu_s) + d.cpu_s * host_speed / speed + net(d) for s, d in dem.items()}


def storage_bytes(order: list[str], dem: dict[str, StageDemand]) -> dict[str, int]:
    """Bytes each stage reads from storage in one cycle, stages taken in ``order`` (of start):
    a package or file is read once, by the first stage that loads it; a later stage reads
    only what it loads beyond that (the rest is in the page cache by then)."""
    charged: dict[str, int] = {}
    out = {}
    for name in order:
        extra = 0
        for key, size in dem[name].loaded.items():
            extra += max(0, size - charged.get(key, 0))
            charged[key] = max(charged.get(key, 0), size)
        out[name] = extra
    return out


def read_s(nbytes: float, start: float, t_init: float, rate_Bps: float, shared: bool) -> float:
    """Seconds to read ``nbytes`` from ``start`` on: while the unit configuration's own
    initialisation still reads the same card (before t_init, Pallex only) the stage gets
    half its rate. Waiting for a network unit after that (DHCP) reads nothing."""
    if shared and start < t_init:
        inside = min(nbytes, (t_init - start) * rate_Bps / 2)
        return inside / (rate_Bps / 2) + (nbytes - inside) / rate_Bps
    return nbytes / rate_Bps


def userspace_end_s(app: App, boot: BootPhases) -> float:
    units = [boot.unit_ready_s(u) for u in app.units()]
    return max([boot.config(app.config).duration_s, *units])


def project(app: App, dem: dict[str, StageDemand], boot: BootPhases, device: DeviceProfile,
            mode: str, host_speed: float = 1.0, link_bps: float | None = None) -> Projection:
    durations = device_durations(dem, device.speed, host_speed, link_bps)
    t_u = userspace_end_s(app, boot)
    if mode == "baseline":
        ready = {s: t_u for s in app.stages}
    else:
        ready = {s: max([boot.systemd_ready_s, *[boot.unit_ready_s(u) for u in app.stages[s].units]])
                 for s in app.stages}
    plan = schedule.earliest(app, ready, durations)
    reads = {s: 0 for s in app.stages}
    if boot.storage_read_Bps > 0:  # a cold start reads its interpreter and libraries off the card
        position = {s: i for i, s in enumerate(app.stages)}
        reads = storage_bytes(sorted(plan, key=lambda s: (plan[s][0], position[s])), dem)
        for name, nbytes in reads.items():
            durations[name] += read_s(nbytes, plan[name][0], boot.config(app.config).duration_s,
                                      boot.storage_read_Bps, mode != "baseline")
        plan = schedule.earliest(app, ready, durations)
    c = boot.userspace_cpu_share if mode != "baseline" else 0.0
    if c > 0:  # stages inside userspace initialisation share the CPU with it
        rate = min(1.0, max(device.cores * (1.0 - c), 0.5))
        taken = 0.0
        for name, (start, finish) in plan.items():
            cpu_dev = dem[name].cpu_s * host_speed / device.speed
            inside = max(0.0, min(finish, t_u) - start) / (finish - start) if finish > start else 0.0
            durations[name] += cpu_dev * inside * (1.0 / rate - 1.0)
            taken += cpu_dev * inside
        plan = schedule.earliest(app, ready, durations)
        t_u += c * taken
    t_end = schedule.end(app, plan)
    p_usi = boot.config(app.config).power_W
    cpu_after = 0.0
    for name, (start, finish) in plan.items():
        cpu_dev = dem[name].cpu_s * host_speed / device.speed
        if finish > start:
            cpu_after += cpu_dev * max(0.0, finish - max(start, t_u)) / (finish - start)
    after = linear_energy_J(device.idle_W, device.busy_W, device.cores, max(0.0, t_end - t_u), cpu_after)
    post_J = p_usi * min(t_end, t_u) + after
    return Projection(mode=mode, userspace_end_s=t_u, app_end_s=t_end,
                      duration_s=boot.bootloader_kernel_s + t_end + boot.shutdown_s, post_kernel_s=t_end,
                      energy_J=boot.bootloader_kernel_J + post_J + boot.shutdown_J, post_kernel_J=post_J,
                      storage_B=reads, plan={k: [round(v[0], 6), round(v[1], 6)] for k, v in plan.items()})
