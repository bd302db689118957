"""A unit configuration on the virtual board: a copy-on-write disk over the image, set up inside the board.

The image as built is ALLU (every unit as Debian ships it). For another
configuration a qcow2 overlay is made over the image and the board boots it
once with ``init=shoal-offline``: that script runs the configuration's
``systemctl --root=/`` commands (from a second, read-only disk) before any
systemd starts, prints the unit links before and after on the serial line, and
powers off. The record (the plan and the change in links) sits beside the
overlay; undo deletes the overlay, leaving the image as it was.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from typing import Callable, TypeVar

from shoal import proc
from shoal.errors import ShoalError
from shoal.pallex import testbed, unitconfig, vmboard, vmimage

T = TypeVar("T")

OFFLINE_TIMEOUT_S = 300.0


def record_path(img: vmimage.Image, config: str) -> Path:
    return img.configured(config).with_suffix(".json")


def plan(img: vmimage.Image, catalog: unitconfig.Catalog, config: str) -> unitconfig.Plan:
    """What ``config`` means for the image as built (its unit list was taken at build time)."""
    return unitconfig.plan(catalog, config, unitconfig.parse_unit_files(img.unit_files.read_text()))


def _links(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        path, sep, target = line.partition("\t")
        if sep:
            out[path.lstrip("/")] = target
    return out


def _script(p: unitconfig.Plan) -> bytes:
    """The commands for the board's second disk."""
    lines = ["set -e", *(" ".join(cmd) for cmd in p.commands("/")),
             "cat > /etc/" + unitconfig.RECORD_NAME + " <<'EOF'",
             json.dumps({"config": p.config, "plan": p.to_json()}), "EOF"]
    return ("\n".join(lines) + "\n").encode()


def padded(script: bytes) -> bytes:
    """A script for the second disk, padded to whole sectors with a comment."""
    pad = -(len(script) + 2) % 512 + 512
    return script + b"#" + b" " * (pad - 1) + b"\n"


def overlay(base: Path, out: Path) -> None:
    """A qcow2 copy-on-write disk over ``base`` (raw or qcow2)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    made = proc.run(["qemu-img", "create", "-q", "-f", "qcow2", "-b", str(base), "-F",
                     "qcow2" if base.suffix == ".qcow2" else "raw", str(out)])
    if not made.ok:
        raise ShoalError(made.error_line("qemu-img create"))


MAKING = ".making."   # in the name of a layer still being written (by this run or another)


def made_layer(base: Path, out: Path, write: Callable[[Path], T], stale: str | None = None) -> T:
    """A copy-on-write layer ``out`` over ``base``, written by ``write`` (given the disk) under
    another name and renamed once whole: a making cut short leaves no disk that a later run
    would take for the layer. Then the layers the glob ``stale`` finds beside it, other than
    ``out`` and those being made, are removed (never read again). Returns what ``write`` does."""
    making = out.with_name(f"{out.name}{MAKING}qcow2")
    overlay(base, making)
    written = write(making)
    making.rename(out)
    for old in out.parent.glob(stale) if stale else ():
        if old != out and MAKING not in old.name:
            old.unlink(missing_ok=True)
    return written


def run_offline(img: vmimage.Image, spec: vmboard.BoardSpec, disk: Path, script: bytes, what: str) -> dict[str, str]:
    """Boot ``disk`` (written) once with ``init=shoal-offline`` running ``script`` from a second disk,
    before any systemd; returns the sections it printed (unit links before, output, after). On
    failure the disk is removed and ShoalError says what the script printed last."""
    with tempfile.NamedTemporaryFile(suffix=".sh") as second:
        second.write(padded(script))
        second.flush()
        command = vmboard.argv(img, spec, disk=disk, snapshot=False, extra_disk=Path(second.name),
                               network=False, cmdline="console=ttyS0 root=/dev/vda rw quiet "
                                                      "init=/usr/local/sbin/shoal-offline")
        boot = vmboard.power_on(command)
        found = boot.wait_for(f"{vmimage.SIGNAL} offline-done", boot.power_on + OFFLINE_TIMEOUT_S)
        if found:   # its root was synced and read-only before the line: a board slow to power off is cut
            boot.wait_closed(time.monotonic() + 30)
        boot.power_off()
    if not found or found[1].text.split()[-1] != "0":
        disk.unlink(missing_ok=True)
        out = testbed.sections(boot.text()).get("output", "").strip().splitlines()[-2:]
        # Nothing from the script: QEMU's own last words (its errors share the serial line's pipe).
        said = out or [line.text for line in boot.lines if line.text.strip()][-2:]
        raise ShoalError(f"{what} inside the board failed: {' | '.join(said) or 'no answer on the serial line'}"
                         "; the image is unchanged")
    return testbed.sections(boot.text())


def apply(img: vmimage.Image, catalog: unitconfig.Catalog, config: str, spec: vmboard.BoardSpec) -> dict:
    """Make ``config``'s overlay (once) and return its record."""
    record = record_path(img, config)
    if record.exists() and img.configured(config).exists():
        return json.loads(record.read_text())
    p = plan(img, catalog, config)
    start = time.monotonic()
    parts = made_layer(img.disk, img.configured(config),
                       lambda disk: run_offline(img, spec, disk, _script(p), f"applying {config}"))
    result = {"config": config, "plan": p.to_json(), "accel": spec.accel, "apply_s": time.monotonic() - start,
              "links": unitconfig.link_change(_links(parts.get("before", "")), _links(parts.get("after", ""))),
              "output": parts.get("output", "")}
    record.write_text(json.dumps(result, indent=1) + "\n")
    return result


def undo(img: vmimage.Image, config: str) -> bool:
    """Drop ``config``'s overlay; the image itself was never written. False if there was none."""
    had = img.configured(config).exists()
    img.configured(config).unlink(missing_ok=True)
    record_path(img, config).unlink(missing_ok=True)
    return had


def disk_for(img: vmimage.Image, catalog: unitconfig.Catalog, config: str, spec: vmboard.BoardSpec,
             on_note=None) -> Path:
    """The disk a cycle of ``config`` boots: the image itself for ALLU, else the configuration's overlay."""
    catalog.config(config)
    if config == "ALLU":
        return img.disk
    if not img.configured(config).exists():
        if on_note:
            on_note(f"applying {config} to the virtual board (one boot with init=shoal-offline)")
        apply(img, catalog, config, spec)
    return img.configured(config)
