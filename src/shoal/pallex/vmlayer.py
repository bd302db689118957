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

Seed 004 halts (``systemctl halt --force``): on its ARM boards halt powers the
board off (§V-B); on x86 halt leaves the machine on, so the board powers off.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

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

FILES = {"/etc/rc.local": RC_LOCAL, "/usr/local/sbin/shoal-shutdown": SHUTDOWN}


def key() -> str:
    return hashlib.sha256(repr(sorted(FILES.items())).encode()).hexdigest()[:10]


def script() -> bytes:
    """What the offline boot runs: each file written whole, made executable."""
    lines = ["set -e"]
    for path, text in FILES.items():
        assert "LAYER_FILE_END" not in text
        lines += [f"cat > {path} <<'LAYER_FILE_END'", text.rstrip("\n"), "LAYER_FILE_END", f"chmod 755 {path}"]
    return ("\n".join(lines) + "\n").encode()


def path(img: vmimage.Image, config: str) -> Path:
    return img.directory / "configs" / f"{config}-layer-{key()}.qcow2"


def disk_for(img: vmimage.Image, config_disk: Path, config: str, spec: vmboard.BoardSpec, on_note=None) -> Path:
    """The layer over ``config_disk``, made once (one offline boot) and cached; made again
    when its base was written after it (a configuration undone and applied again makes a
    new disk, which a copy-on-write layer over the old one would silently misread)."""
    out = path(img, config)
    if out.exists():
        if out.stat().st_mtime_ns >= config_disk.stat().st_mtime_ns:
            return out
        out.unlink()
    if on_note:
        on_note(f"writing shoal's shutdown hook on a layer over {config}'s disk (one boot with init=shoal-offline)")
    tmp = out.with_name(out.name + ".making.qcow2")
    vmconfig.overlay(config_disk, tmp)
    vmconfig.run_offline(img, spec, tmp, script(), f"writing the board layer over {config}")
    tmp.rename(out)
    return out


def cmdline(mode: str | None) -> str:
    """The cycle's kernel command line: the testbed's, asking for ``mode`` (None: the power is cut)."""
    return vmboard.CMDLINE + (f" {PARAM}={mode}" if mode else "")
