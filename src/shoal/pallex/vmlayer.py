"""The board layer: shoal's own files for a cycle, on a copy-on-write disk over a configuration's.

A configuration's disk (the image for ALLU, its overlay otherwise, ``vmconfig``)
holds the units the configuration keeps; the layer over it holds what the
testbed itself puts on the board, written once by an offline boot
(``vmconfig.run_offline``) and kept in the cache under a name keyed by its
content, so the image and the configurations' disks are never written:

* ``/etc/rc.local`` as the image's, with ``shoal-shutdown`` run after the report;
* ``/usr/local/sbin/shoal-shutdown``: the shutdown a cycle asks for on the kernel
  command line (``shoal.shutdown=graceful|forced|forced-forced``, seed 004 §V),
  announced on the serial line with the guest's uptime, then ``systemctl
  poweroff`` with no, one or two ``--force``. Without the parameter it does
  nothing and the testbed cuts the power, as before.
* ``/usr/local/sbin/shoal-monitor`` and its unit, started first in userspace
  (before ``sysinit.target``, no default dependencies): the boot's resource use
  every 100 ms (seed 004 §IV-C, Figs. 8/9): the guest's uptime, /proc/stat's CPU
  times, MemTotal and MemAvailable, the root disk's sectors read and written. A
  bash loop of builtins (its period a ``read -t`` on a FIFO: no process started
  per sample) appends them to /run until the report stops it once the boot has
  finished; the report (the image's, with a ``monitor`` section before its last
  line) prints the samples and the monitor's own CPU time.

Seed 004 halts (``systemctl halt --force``): on its ARM boards halt powers the
board off (§V-B); on x86 halt leaves the machine on, so the board powers off.
"""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path

from shoal.errors import ShoalError
from shoal.pallex import vmboard, vmconfig, vmimage

MODES = {"graceful": "", "forced": "--force", "forced-forced": "--force --force"}
PARAM = "shoal.shutdown"

SHUTDOWN = f"""#!/bin/sh
# shoal: the shutdown the kernel command line asks for ({PARAM}=MODE), seed 004 section V.
mode=
for arg in $(cat /proc/cmdline); do case "$arg" in {PARAM}=*) mode="${{arg#{PARAM}=}}";; esac; done
case "$mode" in
{chr(10).join(f"  {m}) flags='{f}' ;;" for m, f in MODES.items())}
  *) exit 0 ;;
esac
echo "{vmimage.SIGNAL} shutdown $mode $(cut -d' ' -f1 /proc/uptime)"
exec systemctl poweroff $flags
"""

_REPORT_LINE = "/usr/local/sbin/shoal-report > /dev/ttyS0 2>&1 &"
RC_LOCAL = vmimage.RC_LOCAL.replace(
    _REPORT_LINE, "{ /usr/local/sbin/shoal-report; /usr/local/sbin/shoal-shutdown; } > /dev/ttyS0 2>&1 &")
assert RC_LOCAL != vmimage.RC_LOCAL, "the image's rc.local no longer starts the report as the layer expects"

MONITOR_OUT, MONITOR_STOP = "/run/shoal-monitor", "/run/shoal-monitor.stop"
MONITOR_PERIOD_S, MONITOR_MAX_SAMPLES = 0.1, 3000  # at most 5 minutes of samples
# One line a sample: uptime_s, /proc/stat's first eight CPU times (user nice system idle iowait
# irq softirq steal, in USER_HZ), MemTotal and MemAvailable (kB), the disk's sectors read and
# written (512 B each; the first of vda, sda, mmcblk0, as a board's root disk is named).
MONITOR = f"""#!/bin/bash
# shoal: the boot's resource use every {MONITOR_PERIOD_S:g} s, seed 004 section IV-C (Figs. 8/9).
# Builtins only, no process started per sample: the period is a read that times out on a FIFO
# no one writes.
: > {MONITOR_OUT}
rm -f {MONITOR_OUT}.fifo; mkfifo {MONITOR_OUT}.fifo; exec 3<> {MONITOR_OUT}.fifo
n=0
while [ ! -e {MONITOR_STOP} ] && [ $n -lt {MONITOR_MAX_SAMPLES} ]; do
  read up _ < /proc/uptime
  read _ c1 c2 c3 c4 c5 c6 c7 c8 _ < /proc/stat
  total=0; avail=0
  while read key value _; do
    case "$key" in MemTotal:) total=$value ;; MemAvailable:) avail=$value; break ;; esac
  done < /proc/meminfo
  rd=0; wr=0
  while read _ _ name _ _ r _ _ _ w _; do
    case "$name" in vda|sda|mmcblk0) rd=$r; wr=$w; break ;; esac
  done < /proc/diskstats
  echo "$up $c1 $c2 $c3 $c4 $c5 $c6 $c7 $c8 $total $avail $rd $wr" >> {MONITOR_OUT}
  n=$((n + 1))
  read -t {MONITOR_PERIOD_S:g} -u 3 _
done
# Its own cost: utime, stime and its children's, in USER_HZ; when it started (in ticks since
# boot) and ended (uptime); the board's CPUs (/proc/stat's cpuN lines).
cpus=0
while read name _; do case "$name" in cpu[0-9]*) cpus=$((cpus + 1)) ;; esac; done < /proc/stat
read -r stat < /proc/$$/stat
set -- ${{stat##*) }}
read up _ < /proc/uptime
echo "self ${{12}} ${{13}} ${{14}} ${{15}} ${{20}} $up $cpus" >> {MONITOR_OUT}
"""
MONITOR_UNIT = """[Unit]
Description=shoal boot resource monitor (seed 004 Figs. 8/9)
DefaultDependencies=no
Before=sysinit.target

[Service]
Type=simple
ExecStart=/usr/local/sbin/shoal-monitor
"""
_LAST = f'echo "{vmimage.SIGNAL} report-done"'
# The monitor is stopped and its last line (its own cost) waited for, at most 3 s.
_STOP = (f"touch {MONITOR_STOP}\nn=0; while ! grep -q '^self ' {MONITOR_OUT} && [ $n -lt 30 ]; do "
         f"sleep 0.1; n=$((n + 1)); done\nsection monitor cat {MONITOR_OUT}\n")
REPORT = vmimage.REPORT.replace(_LAST, _STOP + _LAST)
assert REPORT != vmimage.REPORT, "the image's report no longer ends as the layer expects"
MONITOR_WANTED = "/etc/systemd/system/sysinit.target.wants/shoal-monitor.service"

FILES = {"/etc/rc.local": RC_LOCAL, "/usr/local/sbin/shoal-shutdown": SHUTDOWN,
         "/usr/local/sbin/shoal-monitor": MONITOR, "/usr/local/sbin/shoal-report": REPORT,
         "/etc/systemd/system/shoal-monitor.service": MONITOR_UNIT}
LINKS = {MONITOR_WANTED: "/etc/systemd/system/shoal-monitor.service"}


# The layer is settled by one whole boot of the board, its writes kept (``settle``); a layer
# made before that was not, and its name must differ.
SETTLED = "settled by one whole boot"
SETTLE_TIMEOUT_S = 300.0  # an unheld TCG boot of ALLU ends in 20-40 s; a loaded host is slower


def key() -> str:
    return hashlib.sha256(repr((sorted(FILES.items()), sorted(LINKS.items()), SETTLED)).encode()).hexdigest()[:10]


UNIT_SUFFIXES = (".service", ".socket", ".target", ".timer", ".conf", ".py")  # files that must not be executable


def script(files: dict[str, str] | None = None, links: dict[str, str] | None = None,
           then: tuple[str, ...] = ()) -> bytes:
    """What the offline boot runs: each file written whole (scripts executable, unit files and
    modules not), the links that enable units, then the commands ``then``. Default: this layer's."""
    lines = ["set -e"]
    for path, text in (FILES if files is None else files).items():
        assert "LAYER_FILE_END" not in text
        mode = "644" if path.endswith(UNIT_SUFFIXES) else "755"
        lines += [f"mkdir -p {path.rsplit('/', 1)[0]}", f"cat > {path} <<'LAYER_FILE_END'", text.rstrip("\n"),
                  "LAYER_FILE_END", f"chmod {mode} {path}"]
    for link, target in (LINKS if links is None else links).items():
        lines += [f"mkdir -p {link.rsplit('/', 1)[0]}", f"ln -sfn {target} {link}"]
    return ("\n".join([*lines, *then]) + "\n").encode()


def path(img: vmimage.Image, config: str) -> Path:
    return img.directory / "configs" / f"{config}-layer-{key()}.qcow2"


def disk_for(img: vmimage.Image, config_disk: Path, config: str, spec: vmboard.BoardSpec, on_note=None) -> Path:
    """The layer over ``config_disk``, made once (one offline boot) and cached; made again
    when its base was written after it (a configuration undone and applied again makes a
    new disk, which a copy-on-write layer over the old one would silently misread)."""
    out = path(img, config)
    if cached(out, config_disk):
        return out
    if on_note:
        on_note(f"writing shoal's board files (boot monitor, shutdown hook) on a layer over {config}'s disk "
                f"(one boot with init=shoal-offline), then booting it once as a board's first boot")
    def write(disk: Path) -> None:
        vmconfig.run_offline(img, spec, disk, script(), f"writing the board layer over {config}")
        settle(img, spec, disk, config)

    # Layers of earlier testbed files (another key) are never read again: 20 MB each for ALLU.
    vmconfig.made_layer(config_disk, out, write, stale=f"{config}-layer-*.qcow2")
    return out


def cached(layer: Path, base: Path) -> bool:
    """Whether ``layer`` is there and was made after its ``base`` disk was last written (a
    layer older than its base is removed)."""
    if layer.exists():
        if layer.stat().st_mtime_ns >= base.stat().st_mtime_ns:
            return True
        layer.unlink()
    return False


def settle(img: vmimage.Image, spec: vmboard.BoardSpec, disk: Path, config: str) -> None:
    """Boot ``disk`` once to the end of userspace and shut it down gracefully, its writes kept:
    what a board's card holds after its first boot. Seed 004 cycled each configuration 50
    times on one card, so every measured boot but the first found them: dphys-swapfile's
    100 MB swap file (it writes one only when there is none of the configured size), the
    journal's files, the random seed. Each cycle then boots a snapshot of this disk."""
    settled = dataclasses.replace(spec, read_Bps=None, write_Bps=None)  # the state, not the card's speed
    boot = vmboard.power_on(vmboard.argv(img, settled, disk=disk, snapshot=False, cmdline=cmdline("graceful")))
    closed = boot.wait_closed(boot.power_on + SETTLE_TIMEOUT_S)
    if closed is None:
        boot.power_off()
        disk.unlink(missing_ok=True)
        last = [line.text for line in boot.lines[-2:]]
        raise ShoalError(f"the first boot of {config}'s board layer did not power off within "
                         f"{SETTLE_TIMEOUT_S:.0f} s (last on the serial line: {' | '.join(last) or 'nothing'}); "
                         "the layer is not kept")


def cmdline(mode: str | None) -> str:
    """The cycle's kernel command line: the testbed's, asking for ``mode`` (None: the power is cut)."""
    return vmboard.CMDLINE + (f" {PARAM}={mode}" if mode else "")
