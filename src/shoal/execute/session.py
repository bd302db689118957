"""The running half of a request: the cluster it runs on, and what every measurement on
it needs, decided once.

``Where`` is what was asked; ``Where.open(run)`` gives a ``Session`` for the run's
life: the cluster (brought up and down), the energy meter of its nodes (None unless
``--power``), the monitor of whether emulated devices got their CPU, the watch on
whether real hosts still answer, the host speed
the devices are held against, and the device clock. The clock is the one place host
time becomes device time: an emulated cluster runs D times slower than real time
(shoal.cluster.dilation), so a time measured on the host is divided by D, a rate
multiplied by it, and a timeout for the devices lasts D times longer on the host.
bench, work, dsm and study take the session.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable

if TYPE_CHECKING:
    from shoal.cluster.hostspeed import HostSpeed
    from shoal.cluster.session import Cluster
    from shoal.execute.meter import Meter


@dataclass(frozen=True)
class DeviceClock:
    """Host time to device time at one dilation D (1 where nothing is emulated)."""

    dilation: float = 1.0

    def seconds(self, host_s: float) -> float:
        """A time measured on the host, as the devices saw it."""
        return host_s / self.dilation

    def rate(self, per_host_s: float) -> float:
        """A rate (bytes, operations, frames per second) measured on the host."""
        return per_host_s * self.dilation

    def energy(self, host_J: float) -> float:
        """Joules over a dilated window: the same watts for D times the devices' time."""
        return host_J / self.dilation

    def timeout(self, device_s: float) -> float:
        """Host seconds to allow for what takes ``device_s`` on the devices."""
        return device_s * self.dilation

    def record(self, record: dict[str, Any], times: Iterable[str] = (),
               rates: Iterable[str] = ()) -> dict[str, Any]:
        """A copy of ``record`` with the fields named in ``times`` (numbers or lists of them)
        as device seconds and those in ``rates`` as per device second; absent or empty
        fields stay as they are. CPU seconds are not times here: the same work costs the
        same CPU at any D."""
        if self.dilation == 1:
            return record
        out = dict(record)
        for keys, convert in ((times, self.seconds), (rates, self.rate)):
            for key in keys:
                value = record.get(key)
                if isinstance(value, list):
                    out[key] = [convert(float(v)) for v in value]
                elif value not in (None, ""):
                    out[key] = convert(float(value))
        return out


@dataclass
class Session:
    """A request's cluster, brought up, with its meter, slack monitor, host speed and clock."""

    cluster: "Cluster"
    meter: "Meter | None" = None
    # Whether emulated devices got their CPU budgets (cluster.slack.Monitor), None elsewhere.
    slack: Any = None
    # Whether real hosts still answer (cluster.liveness.Watch), None where nothing is asked.
    liveness: Any = None

    def lost(self) -> str | None:
        """A host that stopped answering during the run ("ADDRESS: why"), else None: a job
        on it is stopped at once rather than at its timeout."""
        return self.liveness.lost() if self.liveness is not None else None

    @property
    def clock(self) -> DeviceClock:
        return DeviceClock(self.cluster.dilation)

    @property
    def dilation(self) -> float:
        return self.cluster.dilation

    @property
    def host_speed(self) -> "HostSpeed | None":
        """The host core emulated devices are held against (None: nothing emulated here)."""
        emulated = self.cluster.emulated
        return emulated.host if emulated is not None else None

    def describe(self) -> dict[str, Any]:
        """What a run's manifest records of where it ran (host speed and dilation included)."""
        return self.cluster.describe()

    def host_speed_record(self) -> dict[str, Any] | None:
        """The host speed for a run's manifest and findings, with the kernel each emulated
        profile's speed is on; None where nothing is emulated here."""
        host = self.host_speed
        if host is None:
            return None
        kernels = {n.profile.name: n.profile.speed_kernel for n in self.cluster.nodes}
        return {**host.describe(), "profiles": kernels}
