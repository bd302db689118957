"""Power and energy: sources -> sampler -> energy per phase and per node.

Sources (one module each): ``rapl`` (powercap RAPL, Intel and AMD),
``hwmon`` (energy/power/INA2xx/INA3221), ``battery`` (power_supply),
``httpmeter`` (a meter answering JSON over HTTP), ``meterlog`` (a meter's
CSV log), ``model`` (utilisation x device idle/busy watts). ``spec`` parses
``--source`` strings and auto-detects; ``sampler`` polls in the background
(or as its own process for remote nodes); ``integrate`` turns readings into
energy; ``clock`` maps clocks; ``session`` is the API benchmarks call;
``efficiency`` holds performance-per-watt helpers. See docs/power.md.
"""

# Names resolve on first use, so `python -m shoal.power.sampler` does not
# import the sampler twice (once through this package, once as __main__).
_EXPORTS = {
    "COLUMNS": "session", "Session": "session", "open_session": "session",
    "Offset": "clock", "estimate_offset": "clock", "wall_minus_mono": "clock",
    "above_idle": "efficiency", "bytes_per_s_per_W": "efficiency", "energy_per_byte": "efficiency",
    "energy_per_op": "efficiency", "ops_per_s_per_W": "efficiency",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
