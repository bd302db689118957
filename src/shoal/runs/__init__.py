"""Run directories: the one place that knows where results live."""
