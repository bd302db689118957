"""shoal: energy-aware parallel computing on small Linux devices."""

__version__ = "0.1.0"
