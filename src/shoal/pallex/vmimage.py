"""The virtual board's disk image: Debian 12 from Debian packages, built by mmdebstrap, cached.

The image holds systemd and the packages that provide the Appendix A units
Debian has (``pallex_units.toml``), and shoal's completion signal: ``rc.local``
(seed 004's end of userspace initialisation) writes one line to the serial
console, then a report of ``systemd-analyze`` and the unit timestamps follows
once the boot has finished. mmdebstrap runs as the user (``--mode=auto``:
unshare with the user's subordinate ids, root mode under root) and writes an
ext2 image with genext2fs, so nothing here needs root; the image is grown and
given a journal with resize2fs and tune2fs, and the kernel and initrd are
copied out of its /boot. Everything lands in the shoal cache, keyed by what
went into it.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from shoal import proc
from shoal.errors import ShoalError
from shoal.mpi.build import cache_root

SUITE = "bookworm"
# Appendix A's units as Debian packages them (see pallex_units.toml), a kernel, and what rc.local's
# report needs. Left out, and listed there with the reason: console-setup, plymouth, systemd-resolved.
# Python with numpy and cryptography: what Pallex's stage programs import (``pallex lab --vm``, vmapp);
# they start no unit, so the boot is the same without them.
PACKAGES = ("systemd-sysv", "udev", "kmod", "linux-image-cloud-amd64", "ifupdown", "isc-dhcp-client",
            "openssh-server", "avahi-daemon", "dbus", "bluez", "wpasupplicant", "rsyslog", "cron",
            "dphys-swapfile", "fake-hwclock", "sudo", "systemd-timesyncd", "rpcbind", "nfs-common",
            "alsa-utils", "rsync", "busybox-static", "python3", "python3-numpy", "python3-cryptography")
IMAGE_BYTES = 2 * 1024 ** 3  # room for dphys-swapfile's 100 MB swap file and the journal
SIGNAL = "SHOAL-SIGNAL"      # the completion signal's line on the serial console
INITRD_DONE = f"{SIGNAL} initrd-done"   # the initrd hands over to systemd (the guest's uptime then)
REPORT_BEGIN, REPORT_END = "SHOAL-REPORT-BEGIN", "SHOAL-REPORT-END"
TOOLS = {"mmdebstrap": "mmdebstrap", "genext2fs": "genext2fs", "resize2fs": "e2fsprogs",
         "tune2fs": "e2fsprogs", "qemu-img": "qemu-utils"}

# rc.local: seed 004's end of userspace initialisation. The signal goes out at once; the report
# (which needs the boot to have finished) from a background job rc-local.service leaves running.
RC_LOCAL = f"""#!/bin/sh
# shoal: the completion signal on the serial line (seed 004's SendBitStream), then the report.
echo "{SIGNAL} rc-local $(cut -d' ' -f1 /proc/uptime)" > /dev/ttyS0
/usr/local/sbin/shoal-report > /dev/ttyS0 2>&1 &
exit 0
"""

REPORT = f"""#!/bin/sh
# shoal: the unit timestamps at once, then systemd-analyze once the boot has finished (at most 60 s).
section() {{ echo "{REPORT_BEGIN} $1"; shift; "$@" 2>&1; echo "{REPORT_END} $1"; }}
section manager systemctl show -p UserspaceTimestampMonotonic -p KernelTimestampMonotonic
section units systemctl show -p Id -p ExecMainStartTimestampMonotonic -p ActiveEnterTimestampMonotonic -p ActiveState rc-local.service bluetooth.service
section config cat /etc/shoal-pallex-config.json
echo "{SIGNAL} timestamps-done"
timeout 60 systemctl is-system-running --wait > /dev/null 2>&1
section time systemd-analyze time
section blame systemd-analyze blame --no-pager
section critical-chain systemd-analyze critical-chain --no-pager
section failed systemctl --failed --no-legend --no-pager
echo "{SIGNAL} report-done"
"""

# Applies a configuration's systemctl commands inside the board (init= this, before systemd): the
# commands come on the second disk, the change to the unit links goes back on the serial line.
OFFLINE = f"""#!/bin/sh
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -o remount,rw /
links() {{ find /etc/systemd/system -type l -printf '%p\\t%l\\n' | sort; }}
echo "{REPORT_BEGIN} before"; links; echo "{REPORT_END} before"
sh /dev/vdb > /tmp/out 2>&1; rc=$?
echo "{REPORT_BEGIN} output"; cat /tmp/out; echo "{REPORT_END} output"
echo "{REPORT_BEGIN} after"; links; echo "{REPORT_END} after"
sync; mount -o remount,ro /
echo "{SIGNAL} offline-done $rc"
echo o > /proc/sysrq-trigger
sleep 10
"""

HOOKS = (
    "echo '/dev/vda / ext4 rw,errors=remount-ro 0 1' > \"$1/etc/fstab\"",
    "echo board > \"$1/etc/hostname\"",
    "chroot \"$1\" passwd -d root",
    "printf 'auto lo\\niface lo inet loopback\\n\\nauto eth0\\niface eth0 inet dhcp\\n' > \"$1/etc/network/interfaces\"",
    # Raspbian's own setting: a 100 MB swap file, not twice the memory
    "echo CONF_SWAPSIZE=100 > \"$1/etc/dphys-swapfile\"",
)

# The board's initrd: busybox, the virtio disk's modules and INITRD_INIT. Debian's own initrd runs udev
# and waits for it to settle, a minute of a loaded host's time under TCG; the seed's boards have none.
# Its last line on the console is the start of userspace (systemd follows at once) at no cost to the
# boot: a Pallex cycle may power off before rc.local's report says when systemd started.
INITRD_INIT = """#!/bin/busybox sh
/bin/busybox mount -t devtmpfs devtmpfs /dev
/bin/busybox mount -t proc proc /proc
for m in /modules/*.ko; do /bin/busybox insmod "$m"; done
init=/sbin/init
for arg in $(/bin/busybox cat /proc/cmdline); do case "$arg" in init=*) init="${arg#init=}";; esac; done
i=0
while [ ! -b /dev/vda ] && [ $i -lt 600 ]; do /bin/busybox sleep 0.05; i=$((i + 1)); done
/bin/busybox mount -t ext4 -o rw /dev/vda /newroot || { echo "initrd: cannot mount /dev/vda"; exec /bin/busybox sh; }
read up _ < /proc/uptime
echo "SHOAL-SIGNAL initrd-done $up"
/bin/busybox umount /proc
/bin/busybox mount --move /dev /newroot/dev
exec /bin/busybox switch_root /newroot "$init"
"""

assert INITRD_DONE in INITRD_INIT

MAKE_INITRD = """#!/bin/sh
# mmdebstrap customize hook ($1: the image's root): the board's initrd, written to OUT.
set -e
root="$1"; d="$root/tmp/shoal-initrd"
kver=$(ls "$root/lib/modules" | head -n 1)
rm -rf "$d"; mkdir -p "$d/bin" "$d/dev" "$d/proc" "$d/newroot" "$d/modules"
cp "$root/bin/busybox" "$d/bin/busybox"
n=10
for m in $(chroot "$root" modprobe -a -S "$kver" --show-depends virtio_pci virtio_blk | awk '/^insmod/ {print $2}'); do
  [ -e "$d/modules/"*"-$(basename "$m")" ] 2>/dev/null && continue
  n=$((n + 1)); cp "$root$m" "$d/modules/$n-$(basename "$m")"
done
cp "$root/usr/local/sbin/shoal-initrd-init" "$d/init"; chmod 755 "$d/init"
chroot "$root" sh -c 'cd /tmp/shoal-initrd && find . | cpio -o -H newc --quiet | gzip -1' > "OUT"
rm -rf "$d" "$root/usr/local/sbin/shoal-initrd-init"
"""


@dataclass(frozen=True)
class Image:
    directory: Path
    disk: Path
    kernel: Path
    initrd: Path
    unit_files: Path   # `systemctl list-unit-files` of the image as built (ALLU: as shipped)

    def exists(self) -> bool:
        return all(p.exists() for p in (self.disk, self.kernel, self.initrd, self.unit_files))

    def configured(self, config: str) -> Path:
        """The overlay disk that carries a unit configuration on top of the image."""
        return self.directory / "configs" / f"{config}.qcow2"


def key() -> str:
    """What the image is made of: the suite, the packages and shoal's files in it."""
    text = json.dumps([SUITE, PACKAGES, IMAGE_BYTES, RC_LOCAL, REPORT, OFFLINE, HOOKS, INITRD_INIT, MAKE_INITRD])
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def image(cache: Path | None = None) -> Image:
    d = (cache or cache_root()) / "pallex-vm" / f"debian12-{key()}"
    return Image(d, d / "root.img", d / "vmlinuz", d / "initrd.img", d / "unit-files.txt")


def require() -> Image:
    img = image()
    if not img.exists():
        raise ShoalError(f"no virtual board image in {img.directory}; build it first: shoal pallex vm build")
    return img


def missing_tools() -> list[str]:
    return sorted({pkg for tool, pkg in TOOLS.items() if not shutil.which(tool)})


def _hook_files(stage: Path) -> list[str]:
    """Customize hooks that copy shoal's scripts in and the kernel, initrd and unit list out."""
    (stage / "rc.local").write_text(RC_LOCAL)
    (stage / "shoal-report").write_text(REPORT)
    (stage / "shoal-offline").write_text(OFFLINE)
    (stage / "initrd-init").write_text(INITRD_INIT)
    make_initrd = stage / "make-initrd"
    make_initrd.write_text(MAKE_INITRD.replace("OUT", str(stage / "initrd.img")))
    make_initrd.chmod(0o755)
    hooks = [f"--customize-hook={h}" for h in HOOKS]
    hooks += [f"--customize-hook=upload {stage / 'rc.local'} /etc/rc.local",
              f"--customize-hook=upload {stage / 'shoal-report'} /usr/local/sbin/shoal-report",
              f"--customize-hook=upload {stage / 'shoal-offline'} /usr/local/sbin/shoal-offline",
              "--customize-hook=chmod 755 \"$1/etc/rc.local\" \"$1/usr/local/sbin/shoal-report\" "
              "\"$1/usr/local/sbin/shoal-offline\"",
              "--customize-hook=chroot \"$1\" systemctl list-unit-files --no-legend --no-pager > "
              f"{stage / 'unit-files.txt'}",
              "--customize-hook=cp \"$1\"/boot/vmlinuz-* " + str(stage / "vmlinuz"),
              f"--customize-hook=upload {stage / 'initrd-init'} /usr/local/sbin/shoal-initrd-init",
              f"--customize-hook={make_initrd}",
              "--customize-hook=chmod 644 " + str(stage / "vmlinuz") + " " + str(stage / "initrd.img")]
    return hooks


def build(force: bool = False, on_line=None, cache: Path | None = None) -> tuple[Image, float]:
    """Build (or find) the image; returns it and the seconds the build took (0 when cached)."""
    img = image(cache)
    if img.exists() and not force:
        return img, 0.0
    missing = missing_tools()
    if missing:
        raise ShoalError(f"the virtual board needs {', '.join(missing)}; run make setup "
                         f"(Debian: apt-get install {' '.join(missing)})")
    stage = img.directory.with_name(img.directory.name + ".building")
    shutil.rmtree(stage, ignore_errors=True)
    stage.mkdir(parents=True)
    start = time.monotonic()
    argv = ["mmdebstrap", "--mode=auto", "--variant=minbase", "--format=ext2",
            "--include=" + ",".join(PACKAGES), "--dpkgopt=path-exclude=/usr/share/{doc,man,locale}/*",
            *_hook_files(stage), SUITE, str(stage / "root.img")]
    result = proc.run(argv, capture=True, timeout=3600, what="mmdebstrap")
    if on_line:
        for line in (result.stderr or "").splitlines():
            on_line(line)
    if not result.ok:
        hint = ("; as a user, mmdebstrap needs subordinate ids (/etc/subuid, /etc/subgid) and the uidmap package"
                if "unshare" in (result.stderr or "") or "subuid" in (result.stderr or "") else "")
        raise ShoalError(result.error_line("mmdebstrap") + hint)
    for argv in (["resize2fs", str(stage / "root.img"), f"{IMAGE_BYTES // 1024}K"],
                 ["tune2fs", "-j", "-O", "extents,dir_index", str(stage / "root.img")]):
        step = proc.run(argv, capture=True)
        if not step.ok:
            raise ShoalError(step.error_line(argv[0]))
    shutil.rmtree(img.directory, ignore_errors=True)
    stage.rename(img.directory)
    for old in img.directory.parent.glob("debian12-*"):
        if old != img.directory and not old.name.endswith(".building"):
            shutil.rmtree(old, ignore_errors=True)  # an image of an earlier shoal: 0.5 GB each
    elapsed = time.monotonic() - start
    (img.directory / "build.json").write_text(json.dumps(
        {"suite": SUITE, "packages": list(PACKAGES), "key": key(), "build_s": elapsed,
         "disk_B": img.disk.stat().st_size}, indent=1) + "\n")
    return img, elapsed
