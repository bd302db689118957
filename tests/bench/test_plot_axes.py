"""Figures label their axes in pretty units while the data stays SI."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from shoal.report.figures import size_and_metric_axes  # noqa: E402


def _labels(metric: str, sizes: list[int], values: list[float]) -> tuple[list[str], list[str]]:
    fig, ax = plt.subplots()
    ax.plot(sizes, values)
    size_and_metric_axes(ax, metric)
    fig.canvas.draw()
    xs = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    ys = [t.get_text() for t in ax.get_yticklabels() if t.get_text()]
    plt.close(fig)
    return xs, ys


def test_sizes_in_bytes_and_times_in_seconds_with_prefixes():
    xs, ys = _labels("time", [1, 1024, 1 << 20, 4 << 20], [1e-6, 2e-6, 1e-4, 4e-4])
    assert len(xs) >= 5 and all(x.endswith((" B", " KiB", " MiB")) for x in xs)
    assert "2 KiB" in xs and "1 MiB" in xs   # powers of two, every third
    assert "1 µs" in ys and "100 µs" in ys


def test_bandwidth_ticks_carry_their_unit():
    _, ys = _labels("bandwidth", [1, 4 << 20], [1e6, 2e10])
    assert "1 MB/s" in ys and "1 GB/s" in ys
