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

from shoal import proc
from shoal.errors import ShoalError
from shoal.pallex import testbed, unitconfig, vmboard, vmimage

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
    """The commands for the board's second disk, padded to whole sectors with a comment."""
    lines = ["set -e", *(" ".join(cmd) for cmd in p.commands("/")),
             "cat > /etc/" + unitconfig.RECORD_NAME + " <<'EOF'",
             json.dumps({"config": p.config, "plan": p.to_json()}), "EOF"]
    text = ("\n".join(lines) + "\n").encode()
    pad = -(len(text) + 2) % 512 + 512
    return text + b"#" + b" " * (pad - 1) + b"\n"


def apply(img: vmimage.Image, catalog: unitconfig.Catalog, config: str, spec: vmboard.BoardSpec) -> dict:
    """Make ``config``'s overlay (once) and return its record."""
    record = record_path(img, config)
    if record.exists() and img.configured(config).exists():
        return json.loads(record.read_text())
    p = plan(img, catalog, config)
    overlay = img.configured(config)
    overlay.parent.mkdir(parents=True, exist_ok=True)
    made = proc.run(["qemu-img", "create", "-q", "-f", "qcow2", "-b", str(img.disk), "-F", "raw", str(overlay)])
    if not made.ok:
        raise ShoalError(made.error_line("qemu-img create"))
    start = time.monotonic()
    with tempfile.NamedTemporaryFile(suffix=".sh") as script:
        script.write(_script(p))
        script.flush()
        command = vmboard.argv(img, spec, disk=overlay, snapshot=False, extra_disk=Path(script.name),
                               network=False, cmdline="console=ttyS0 root=/dev/vda rw quiet "
                                                      "init=/usr/local/sbin/shoal-offline")
        boot = vmboard.power_on(command)
        found = boot.wait_for(f"{vmimage.SIGNAL} offline-done", boot.power_on + OFFLINE_TIMEOUT_S)
        time.sleep(0.5)  # the guest's sync and poweroff follow the line
        boot.process.wait(timeout=30) if boot.process.poll() is None and found else None
        boot.power_off()
    if not found or found[1].text.split()[-1] != "0":
        overlay.unlink(missing_ok=True)
        out = testbed.sections(boot.text()).get("output", "").strip().splitlines()[-2:]
        raise ShoalError(f"applying {config} inside the board failed: {' | '.join(out) or 'no answer on the serial line'}"
                         "; the image is unchanged")
    parts = testbed.sections(boot.text())
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
