"""`shoal doctor`: what this machine offers shoal, and what to do about gaps.

Each check returns a Finding: a name, whether it is fine, what was found,
and — when not fine — the one thing to do.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from shoal import proc
from shoal.errors import ShoalError


@dataclass(frozen=True)
class Finding:
    area: str
    ok: bool
    found: str
    fix: str = ""


def check_mpis(selected: str | None) -> list[Finding]:
    from shoal.mpi import discover

    findings = []
    try:
        mpi = discover.resolve(selected)
        findings.append(Finding("MPI in use", True, f"{mpi.name} ({mpi.bindir})"))
    except ShoalError as exc:
        findings.append(Finding("MPI in use", False, str(exc), "run 'make setup' or pass --mpi PATH"))
    names = {m.kind for m in discover.available()}
    for kind in discover.KINDS:
        if kind not in names:
            findings.append(Finding(f"{kind}", False, "not installed",
                                    "run 'make setup' (installs both MPI wheels into .venv)"))
    return findings


def check_compiler(selected: str | None) -> list[Finding]:
    from shoal.mpi import discover

    cc = proc.find("cc") or proc.find("gcc")
    findings = [Finding("C compiler", bool(cc), cc or "none on PATH",
                        "" if cc else "install gcc (Debian: apt-get install gcc)")]
    try:
        mpi = discover.resolve(selected)
    except ShoalError:
        return findings
    try:
        out = proc.run([str(mpi.mpicc), "--version"], timeout=30, env_add=mpi.env())
        ok = out.returncode == 0
        first = (out.stdout or out.stderr).splitlines()[0] if (out.stdout or out.stderr) else ""
    except ShoalError as exc:
        ok, first = False, str(exc)
    findings.append(Finding("mpicc", ok, f"{mpi.mpicc}: {first}",
                            "" if ok else "the MPI's compiler wrapper does not run; install gcc"))
    return findings


def check_namespaces() -> list[Finding]:
    ip = proc.find("ip")
    if not ip:
        return [Finding("network namespaces", False, "no 'ip' command",
                        "install iproute2 (Debian: apt-get install iproute2)")]
    name = f"shoal-doctor-{os.getpid()}"
    made = proc.run([ip, "netns", "add", name])
    if made.returncode == 0:
        proc.run([ip, "netns", "delete", name])
        findings = [Finding("network namespaces", True, "can create namespaces, veth and bridges")]
    elif _user_namespaces_work():
        # An ordinary user: shoal runs emulated clusters inside a user namespace of its own.
        findings = [Finding("network namespaces", True, "not in the host's namespaces (not root), but "
                            "in a user namespace: emulated clusters run there")]
    else:
        userns = Path("/proc/sys/kernel/unprivileged_userns_clone")
        hint = ("run as root, or allow user namespaces "
                "(sysctl kernel.unprivileged_userns_clone=1)" if userns.exists() else "run as root")
        return [Finding("network namespaces", False, made.stderr.strip() or "cannot create", hint)]
    tc = proc.find("tc")
    findings.append(Finding("tc (link shaping)", bool(tc), tc or "missing",
                            "" if tc else "install iproute2"))
    netem = _kernel_has_module("sch_netem")
    tun = Path("/dev/net/tun").exists()
    compiler = proc.find("cc") or proc.find("gcc")
    if netem:
        findings.append(Finding("link emulation", True, "tc netem (rate, delay, jitter, loss)", ""))
    else:
        ready = tun and bool(compiler)
        findings.append(Finding(
            "link emulation", ready,
            "no netem in this kernel: shoal's link forwarder (TAP devices) emulates rate, "
            "delay, jitter and loss" if ready else
            f"no netem in this kernel, and the link forwarder needs "
            f"{'/dev/net/tun' if not tun else 'a C compiler'}",
            "" if ready else ("modprobe tun" if not tun else "install gcc (Debian: apt install gcc)")))
    return findings


def _user_namespaces_work() -> bool:
    unshare = proc.find("unshare")
    return bool(unshare) and proc.run([unshare, "--user", "--map-root-user", "--net", "true"]).ok


def _kernel_has_module(name: str) -> bool:
    release = os.uname().release
    moddir = Path("/lib/modules") / release
    if any(moddir.rglob(f"{name}.ko*")) if moddir.exists() else False:
        return True
    try:
        return name in Path("/proc/modules").read_text()
    except OSError:
        return False


def check_cgroups() -> list[Finding]:
    return _cgroup_controllers() + [check_cpu_capacity()]


def _cgroup_controllers() -> list[Finding]:
    if Path("/sys/fs/cgroup/cgroup.controllers").exists():
        controllers = Path("/sys/fs/cgroup/cgroup.controllers").read_text().split()
        ok = "cpu" in controllers
        return [Finding("cgroups", ok, f"v2, controllers: {' '.join(controllers)}",
                        "" if ok else "enable the cpu controller to emulate slower devices")]
    v1 = [p for p in (Path("/sys/fs/cgroup/cpu"), Path("/sys/fs/cgroup/cpu,cpuacct")) if p.exists()]
    if v1:
        return [Finding("cgroups", True, f"v1, cpu controller at {v1[0]}")]
    return [Finding("cgroups", False, "no cpu controller mounted",
                    "emulated devices will run at full host speed; mount cgroup v2 or v1 cpu")]


def check_host_speed() -> list[Finding]:
    """This host's core in reference cores, as cached (doctor measures nothing)."""
    from shoal import render
    from shoal.cluster import hostspeed

    cached = hostspeed.cached_here()
    if cached is None:
        return [Finding("host speed", True, "not measured yet: measured when devices are first "
                                            "emulated here (a few seconds), then cached")]
    return [Finding("host speed", True, f"{render.host_speed(cached.describe())}, measured "
                                        f"{cached.measured_utc}; --recalibrate measures it again")]


def check_cpu_capacity() -> Finding:
    """The CPUs emulations are dilated to fit: fewer than the host's inside a CPU quota."""
    from shoal.cluster import cpulimit

    capacity = cpulimit.cpu_capacity()
    found = f"{capacity.usable:g} CPUs for emulated devices"
    if capacity.quota_cpus is not None and capacity.usable < capacity.cpus:
        found += f" (of {capacity.cpus}: the CPU quota of {capacity.limited_by})"
    return Finding("CPU capacity", True, found)


def check_power() -> list[Finding]:
    """Power sources found here, why others are missing, and what ``auto`` picks."""
    from shoal.power import kinds, registry

    entries = registry.describe_sources()
    sensors = any(e["available"] for e in entries if e["name"] in {k.name for k in kinds.sensors()})
    findings = []
    for e in entries:
        if e["name"] == "auto":
            area = "power: auto" if sensors else "power: fallback"
            findings.append(Finding(area, True, e["detail"]))
        elif e["available"]:
            findings.append(Finding(f"power: {e['name']}", True, e["detail"], e["fix"]))
        else:
            findings.append(Finding(f"power: {e['name']}", False, "not found",
                                    f"{e['detail']} — {e['fix']}"))
    return findings


def check_leftovers(fix: bool = False) -> list[Finding]:
    """What crashed shoal processes left behind: emulated clusters nobody owns, and runs
    still marked ``running`` whose process is gone. ``fix`` removes the clusters (only
    what their records name) and marks those runs interrupted."""
    from shoal.runs import registry

    findings = []
    if os.geteuid() == 0:
        from shoal.cluster import state

        if fix:
            gone = state.reap()
            findings.append(Finding("emulated clusters", True,
                                    f"removed leftovers of crashed run(s): {', '.join(gone)}" if gone
                                    else "no leftovers of crashed runs"))
        else:
            left = [r["id"] for r in state.records() if state.is_leftover(r)]
            findings.append(Finding("emulated clusters", not left,
                                    f"leftovers of crashed run(s): {', '.join(left)}" if left
                                    else "no leftovers of crashed runs",
                                    "shoal doctor --fix removes them" if left else ""))
    findings.append(mpi_leftovers(fix))
    if fix:
        marked = registry.reap()
        findings.append(Finding("runs", True, f"marked interrupted (their process was gone): "
                                              f"{', '.join(marked)}" if marked
                                else "none left running by a process that is gone"))
    else:
        stale = registry.stale()
        findings.append(Finding("runs", not stale,
                                f"left running by a process that is gone: {', '.join(stale)}" if stale
                                else "none left running by a process that is gone",
                                "shoal doctor --fix marks them interrupted (--resume continues them)"
                                if stale else ""))
    return findings


def mpi_leftovers(fix: bool = False) -> Finding:
    """The MPIs' files that outlived their jobs (shared memory, launcher files) and that no
    live process holds; ``fix`` removes them."""
    from shoal import heldfiles
    from shoal.mpi import kinds

    patterns = [p for impl in kinds.implementations() for p in impl.leftovers]
    found = heldfiles.unheld(patterns)
    size = sum(b for _, b in found)
    what = f"{len(found)} file(s), {size / 1e6:.1f} MB, that no running process holds"
    if fix:
        gone = heldfiles.remove(path for path, _ in found)
        return Finding("MPI leftovers", True, f"removed {len(gone)} file(s) of stopped MPI jobs "
                                              f"({size / 1e6:.1f} MB)" if gone
                       else "no files of stopped MPI jobs")
    return Finding("MPI leftovers", not found,
                   f"files of stopped MPI jobs: {what}, e.g. {found[0][0]}" if found
                   else "no files of stopped MPI jobs",
                   "shoal doctor --fix removes them" if found else "")


def run_all(selected_mpi: str | None, fix: bool = False) -> list[Finding]:
    findings: list[Finding] = []
    findings += check_leftovers(fix)
    findings += check_mpis(selected_mpi)
    findings += check_compiler(selected_mpi)
    findings += check_namespaces()
    findings += check_cgroups()
    findings += check_host_speed()
    findings += check_power()
    return findings
