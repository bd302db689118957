"""The virtual board: QEMU started and hard-stopped as a power switch, its serial line read.

One boot is one QEMU process: power on is its start, power off a SIGKILL (no
shutdown, as when the testbed's switch cuts the supply). The serial console
is QEMU's stdout; each line is stamped with the host's monotonic clock as it
arrives. The board has its profile's cores and memory and, where the profile
gives them, its SD card's read and write rates (QEMU's block throttling). KVM is used
where a guest actually runs on it: on some hosts /dev/kvm opens but the guest
never gets past its boot loader, so a short probe boot decides, once per host
and kernel, and every boot says which accelerator it ran on.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from dataclasses import dataclass, field
from typing import Any
from pathlib import Path

from shoal import hostfacts, proc
from shoal.errors import ShoalError
from shoal.pallex import vmimage

CMDLINE = ("console=ttyS0 root=/dev/vda rw net.ifnames=0 quiet loglevel=3 systemd.show_status=false "
           "systemd.getty_auto=0")  # a getty on ttyS0 would hang up the report's open console
SHELL_CMDLINE = CMDLINE.replace(" systemd.getty_auto=0", "")  # vm shell: a login on the serial console
KVM_PROBE_S = 20.0  # a kernel that runs prints its banner within this, even under TCG on a loaded host


# Seed 004 §IV-D's two cards, by their UHS speed class: "UHS 1 and UHS 3 refer to minimum
# write speed of 10 MB/sec and 30 MB/sec". Either is read through the board's SD bus (the boot
# profile's storage_read_Bps, 25 MB/s), which also holds the faster card's writes.
CARD_WRITE_BPS = {"u1": 10e6, "u3": 30e6}


def card_rates(card: str | None, bus_Bps: float | None, profile_write_Bps: float | None
               ) -> tuple[float | None, float | None]:
    """(read, write) rates of the board's card: the profile's with no ``card``, else the speed
    class's minimum write held to the bus."""
    if card is None:
        return bus_Bps, profile_write_Bps
    write = CARD_WRITE_BPS[card]
    return bus_Bps, min(write, bus_Bps) if bus_Bps else write


@dataclass(frozen=True)
class BoardSpec:
    cores: int
    memory_B: int
    read_Bps: float | None = None
    accel: str = "tcg"           # kvm | tcg
    write_Bps: float | None = None
    card: str | None = None      # the UHS speed class given (CARD_WRITE_BPS); None: the profile's


@dataclass
class Line:
    t: float                      # host monotonic seconds when the line arrived
    text: str


@dataclass
class Boot:
    """One power-on of the board: its QEMU, the time power came on and the serial lines so far."""

    process: Any  # the Popen of QEMU (shoal.proc.start)
    power_on: float
    lines: list[Line] = field(default_factory=list)
    _cond: threading.Condition = field(default_factory=threading.Condition)
    closed: bool = False
    closed_t: float | None = None  # host monotonic seconds when QEMU's output ended (it exited)

    def _read(self) -> None:
        assert self.process.stdout is not None
        for raw in self.process.stdout:
            line = Line(time.monotonic(), raw.decode(errors="replace").rstrip("\r\n"))
            with self._cond:
                self.lines.append(line)
                self._cond.notify_all()
        with self._cond:
            self.closed, self.closed_t = True, time.monotonic()
            self._cond.notify_all()

    def wait_closed(self, deadline: float) -> float | None:
        """When QEMU exited (its output ended), or None if it still runs at the deadline."""
        with self._cond:
            while not self.closed:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._cond.wait(min(left, 0.5))
            return self.closed_t

    def wait_for(self, prefix: str, deadline: float, start: int = 0) -> tuple[int, Line] | None:
        """The first line from index ``start`` that contains ``prefix``, or None at the deadline
        (host monotonic) or when QEMU exits."""
        with self._cond:
            i = start
            while True:
                while i < len(self.lines):
                    if prefix in self.lines[i].text:
                        return i, self.lines[i]
                    i += 1
                left = deadline - time.monotonic()
                if left <= 0 or self.closed:
                    return None
                self._cond.wait(min(left, 0.5))

    def cpu_s(self) -> float | None:
        """CPU time QEMU has used so far (all its threads), None once it has gone."""
        try:
            fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return None
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def power_off(self) -> float:
        """Cut the power: kill QEMU at once. Returns the host time it happened."""
        t = time.monotonic()
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        return t

    def text(self) -> str:
        return "\n".join(line.text for line in self.lines)


def qemu() -> str:
    found = shutil.which("qemu-system-x86_64")
    if not found:
        raise ShoalError("qemu-system-x86_64 not found; run make setup (Debian: apt-get install qemu-system-x86)")
    return found


def argv(img: vmimage.Image, spec: BoardSpec, disk: Path | None = None, snapshot: bool = True,
         extra_disk: Path | None = None, cmdline: str = CMDLINE, network: bool = True,
         interactive: bool = False, forward: tuple[str, int] | None = None) -> list[str]:
    """QEMU's command line for one boot. ``forward`` (guest address:port, a port on this machine's
    loopback): the guest's connections to the first reach the second (``shoal.pallex.relay``)."""
    drive = f"file={disk or img.disk},if=virtio,format={'qcow2' if (disk or img.disk).suffix == '.qcow2' else 'raw'}"
    if snapshot:
        drive += ",snapshot=on"
    if spec.read_Bps:
        drive += f",throttling.bps-read={int(spec.read_Bps)}"
    if spec.write_Bps:
        drive += f",throttling.bps-write={int(spec.write_Bps)}"
    out = [qemu(), "-accel", spec.accel, "-smp", str(spec.cores), "-m", f"{spec.memory_B // 2 ** 20}M",
           "-kernel", str(img.kernel), "-initrd", str(img.initrd), "-append", cmdline,
           "-drive", drive, "-display", "none", "-no-reboot", "-nodefaults"]
    # TCG's "max" model has RDRAND: the guest's random pool is ready at once, as on a board with a hardware RNG
    out += ["-cpu", "host" if spec.accel == "kvm" else "max"]
    if extra_disk:
        out += ["-drive", f"file={extra_disk},if=virtio,format=raw,readonly=on"]
    nic = "user,model=virtio-net-pci"
    if forward:
        import sys

        # QEMU starts the command for each connection; a comma in an option value is written twice
        relay = f"{sys.executable} -m shoal.pallex.relay {forward[1]}".replace(",", ",,")
        nic += f",guestfwd=tcp:{forward[0]}-cmd:{relay}"
    out += ["-nic", nic] if network else ["-nic", "none"]
    out += ["-serial", "mon:stdio"] if interactive else ["-serial", "stdio", "-monitor", "none"]
    return out


def power_on(command: list[str], group: Path | None = None) -> Boot:
    """Start QEMU (the switch closes) and read its serial line in a thread; QEMU moves into
    ``group`` (a cgroup) at once where one is given, before its guest has run."""
    process = proc.start(command, stdin=proc.DEVNULL, stdout=proc.PIPE, stderr=proc.STDOUT, text=False,
                         bufsize=0).popen
    if group is not None:
        try:
            (group / "cgroup.procs").write_text(str(process.pid))
        except OSError:
            pass  # ended already: its output says why
    boot = Boot(process, time.monotonic())
    threading.Thread(target=boot._read, daemon=True).start()
    return boot


# -- the board's CPU ---------------------------------------------------------------
def board_group() -> tuple[Path | None, str]:
    """A cgroup for QEMU beside emulated devices, weighted as they are above the host's other
    work (``shoal.cluster.cpulimit``), and why not where none can be made. It starts without a
    quota; ``vmspeed`` sets the one that makes the guest's core as fast as the board's."""
    from shoal.cluster import cpulimit

    layout = cpulimit.detect()
    if not layout.version:
        return None, "no cpu cgroup this user may divide: QEMU shares the host with everything else"
    try:
        groups = cpulimit.create_host_group(layout, f"pallex-vm-{os.getpid()}", "board")
        cpulimit.prioritise(layout, True)
    except (OSError, ShoalError) as exc:
        return None, f"no cgroup for QEMU ({exc}): it shares the host with everything else"
    return Path(groups[0]), f"QEMU in {groups[0]}, weighted as emulated devices are"


def release_group(group: Path | None) -> None:
    for level in (group, group.parent) if group else ():
        try:
            level.rmdir()
        except OSError:
            pass


# -- which accelerator -----------------------------------------------------------------
def _accel_cache(img: vmimage.Image) -> Path:
    return img.directory / "accel.json"


def kvm_usable() -> str | None:
    """Why KVM cannot be tried here, or None."""
    if not os.path.exists("/dev/kvm"):
        return "no /dev/kvm"
    try:
        os.close(os.open("/dev/kvm", os.O_RDWR))
    except OSError as exc:
        return f"/dev/kvm: {exc.strerror}"
    return None


def choose_accel(img: vmimage.Image, spec: BoardSpec, asked: str = "auto") -> tuple[str, str]:
    """(accelerator, why). auto: KVM if a probe boot's kernel prints its banner under it, else TCG."""
    if asked in ("kvm", "tcg"):
        return asked, "asked for"
    why = kvm_usable()
    if why:
        return "tcg", why
    cache = _accel_cache(img)
    host = f"{os.uname().nodename} {hostfacts.cpu_model()}"
    if cache.exists():
        known = json.loads(cache.read_text())
        if known.get("host") == host:
            return known["accel"], known["why"] + " (probed before on this host)"
    probe = BoardSpec(1, 256 * 2 ** 20, None, "kvm")
    command = argv(img, probe, network=False, cmdline="console=ttyS0 earlyprintk=ttyS0 panic=-1 root=/dev/null")
    boot = power_on(command)
    found = boot.wait_for("Linux version", time.monotonic() + KVM_PROBE_S)
    boot.power_off()
    if found:
        accel, why = "kvm", "a KVM guest printed its kernel banner"
    else:
        accel, why = "tcg", f"/dev/kvm opens but a KVM guest printed nothing in {KVM_PROBE_S:g} s"
    cache.write_text(json.dumps({"host": host, "accel": accel, "why": why}) + "\n")
    return accel, why
