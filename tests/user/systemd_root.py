"""A small offline systemd root, shaped like a Debian 12 board's: unit files under usr/lib/systemd/system
with the [Install] sections their packages ship, enabled with ``systemctl --root`` as dpkg does."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

# unit -> [Install] lines (None: static, no [Install] section)
UNITS = {
    "multi-user.target": None, "sockets.target": None, "getty.target": None, "network-online.target": None,
    "sysinit.target": None, "bluetooth.target": None, "timers.target": None,
    "systemd-journald.service": None, "rc-local.service": None, "systemd-random-seed.service": None,
    "ssh.service": "WantedBy=multi-user.target\nAlias=sshd.service",
    "networking.service": "WantedBy=multi-user.target network-online.target",
    "avahi-daemon.service": "WantedBy=multi-user.target\nAlso=avahi-daemon.socket\nAlias=dbus-org.freedesktop.Avahi.service",
    "avahi-daemon.socket": "WantedBy=sockets.target",
    "bluetooth.service": "WantedBy=bluetooth.target\nAlias=dbus-org.bluez.service",
    "rsyslog.service": "WantedBy=multi-user.target\nAlias=syslog.service",
    "cron.service": "WantedBy=multi-user.target",
    "dphys-swapfile.service": "WantedBy=multi-user.target",
    "wpa_supplicant.service": "WantedBy=multi-user.target\nAlias=dbus-fi.w1.wpa_supplicant1.service",
    "alsa-restore.service": None,
    "getty@.service": "WantedBy=getty.target\nDefaultInstance=tty1",
    "e2scrub_reap.service": "WantedBy=multi-user.target",
    "fstrim.timer": "WantedBy=timers.target",
    "shoal-report.service": "WantedBy=multi-user.target",
}
SHIPPED_DISABLED = ("wpa_supplicant.service",)


def make_root(root: Path) -> Path:
    lib = root / "usr/lib/systemd/system"
    lib.mkdir(parents=True)
    (root / "etc/systemd/system").mkdir(parents=True)
    for unit, install in UNITS.items():
        kind = "Service" if unit.endswith(".service") else ("Socket" if unit.endswith(".socket") else None)
        text = f"[Unit]\nDescription={unit}\n"
        if kind == "Service":
            text += "\n[Service]\nType=oneshot\nExecStart=/bin/true\n"
        elif kind == "Socket":
            text += "\n[Socket]\nListenStream=/run/x.sock\n"
        elif unit.endswith(".timer"):
            text += "\n[Timer]\nOnCalendar=weekly\n"
        if install:
            text += f"\n[Install]\n{install}\n"
        (lib / unit).write_text(text)
    enable = [u for u, i in UNITS.items() if i and u not in SHIPPED_DISABLED and u != "avahi-daemon.socket"]
    subprocess.run(["systemctl", f"--root={root}", "enable", *enable], check=True, capture_output=True)
    return root


def unit_state(root: Path) -> dict[str, str]:
    """Every entry under etc/systemd/system: a link's target, a file's SHA-256, a directory's mark."""
    base = root / "etc/systemd/system"
    out = {}
    for dirpath, dirnames, filenames in os.walk(base):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            rel = str(p.relative_to(root))
            if p.is_symlink():
                out[rel] = "-> " + os.readlink(p)
            elif p.is_dir():
                out[rel] = "dir"
            else:
                out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out
