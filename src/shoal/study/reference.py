"""The study's "traditional system": what the cluster is compared with.

Three kinds, one type, so no part of the study compares strings:

- ``profile``: a device profile emulated beside the cluster (``nuc``), or several devices of
  it on their profile's link (``8xxeon-blade``: seed 002's computer cluster of 8 blades);
- ``host``: this machine, with its own power readings;
- ``none``: no reference.

Written to the manifest as its text (``nuc``, ``host``, ``none``) so that
older runs read back unchanged.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from shoal.errors import ShoalError

HOST = "host"
NONE = "none"
MAX_DEVICES = 64  # a reference cluster, not a second study


@dataclass(frozen=True)
class Reference:
    kind: str  # "profile", "host" or "none"
    profile: str | None = None  # the device profile's name when kind == "profile"
    count: int = 1  # devices of the profile (kind == "profile")
    # What its devices carry, as an --emulate term's suffixes ("@storage=seed002-nas"; "": none).
    suffix: str = ""

    @classmethod
    def parse(cls, text: str | None) -> "Reference":
        """From --reference (or a manifest); None or empty is no reference."""
        value = (text or NONE).strip().lower()
        if value in (HOST, NONE):
            return cls(value)
        value, at, suffix = value.partition("@")
        suffix = at + suffix
        match = re.fullmatch(r"(\d+)x(.+)", value)
        if match:
            count = int(match[1])
            if not 1 <= count <= MAX_DEVICES:
                raise ShoalError(f"--reference {value}: give 1 to {MAX_DEVICES} devices, e.g. 8xxeon-blade")
            return cls("profile", match[2], count, suffix)
        return cls("profile", value, 1, suffix)

    def with_count(self, count: int) -> "Reference":
        return Reference(self.kind, self.profile, count, self.suffix)

    def with_suffix(self, suffix: str) -> "Reference":
        """The same devices carrying ``suffix`` too ("@storage=seed002-nas")."""
        return Reference(self.kind, self.profile, self.count, self.suffix + suffix)

    @property
    def term(self) -> str:
        """Its devices as an --emulate term (COUNTxPROFILE with its suffixes)."""
        return f"{self.count}x{self.profile}{self.suffix}"

    @property
    def emulated(self) -> bool:
        """An emulated device of a profile, brought up with the cluster."""
        return self.kind == "profile"

    @property
    def local(self) -> bool:
        """This machine, measured after the cluster."""
        return self.kind == HOST

    @property
    def present(self) -> bool:
        return self.kind != NONE

    def __str__(self) -> str:
        if not self.emulated:
            return self.kind
        return self.term if self.count > 1 else f"{self.profile}{self.suffix}"
