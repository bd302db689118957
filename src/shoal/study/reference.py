"""The study's "traditional system": what the cluster is compared with.

Three kinds, one type, so no part of the study compares strings:

- ``profile``: a device profile emulated beside the cluster (``nuc``);
- ``host``: this machine, with its own power readings;
- ``none``: no reference.

Written to the manifest as its text (``nuc``, ``host``, ``none``) so that
older runs read back unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass

HOST = "host"
NONE = "none"


@dataclass(frozen=True)
class Reference:
    kind: str  # "profile", "host" or "none"
    profile: str | None = None  # the device profile's name when kind == "profile"

    @classmethod
    def parse(cls, text: str | None) -> "Reference":
        """From --reference (or a manifest); None or empty is no reference."""
        value = (text or NONE).strip().lower()
        if value in (HOST, NONE):
            return cls(value)
        return cls("profile", value)

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
        return self.profile if self.emulated else self.kind
