"""Deterministic frames and the digit set the KNN model is trained on.

A frame is 1000 x 833 RGB bytes (2 499 000 B, the seed's ~2.5 MB picture):
an 8 x 8 digit sample scaled up, plus seeded noise, so the digit it shows is
known. Samples are 5 x 7 glyphs shifted inside 8 x 8, with random stroke
strength and noise, on the 0..16 scale of the classic 8 x 8 digit sets.
"""

from __future__ import annotations

import numpy as np

HEIGHT, WIDTH, CHANNELS = 1000, 833, 3
FRAME_BYTES = HEIGHT * WIDTH * CHANNELS
GRID = 8

_GLYPHS = {
    0: ["01110", "10001", "10011", "10101", "11001", "10001", "01110"],
    1: ["00100", "01100", "00100", "00100", "00100", "00100", "01110"],
    2: ["01110", "10001", "00001", "00010", "00100", "01000", "11111"],
    3: ["11111", "00010", "00100", "00010", "00001", "10001", "01110"],
    4: ["00010", "00110", "01010", "10010", "11111", "00010", "00010"],
    5: ["11111", "10000", "11110", "00001", "00001", "10001", "01110"],
    6: ["00110", "01000", "10000", "11110", "10001", "10001", "01110"],
    7: ["11111", "00001", "00010", "00100", "01000", "01000", "01000"],
    8: ["01110", "10001", "10001", "01110", "10001", "10001", "01110"],
    9: ["01110", "10001", "10001", "01111", "00001", "00010", "01100"],
}
GLYPHS = {d: np.array([[int(c) for c in row] for row in rows], dtype=float) for d, rows in _GLYPHS.items()}


def sample(digit: int, rng: np.random.Generator) -> np.ndarray:
    """One 8 x 8 sample of ``digit`` (values 0..16)."""
    out = np.zeros((GRID, GRID))
    dy, dx = rng.integers(0, 2), rng.integers(0, 4)
    out[dy:dy + 7, dx:dx + 5] = GLYPHS[digit] * rng.uniform(10.0, 16.0)
    out += rng.normal(0.0, 2.0, size=out.shape)
    return np.clip(out, 0.0, 16.0)


def training_set(n: int = 1797, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``n`` samples (n x 64 float64) and their labels (int64), digits in turn."""
    rng = np.random.default_rng(seed)
    labels = np.arange(n, dtype=np.int64) % 10
    return np.stack([sample(int(d), rng).ravel() for d in labels]), labels


def _cells(size: int) -> np.ndarray:
    return (np.arange(size) * GRID) // size


def frame(seed: int, digit: int | None = None) -> tuple[bytes, int]:
    """A frame and the digit it shows (``seed % 10`` unless given)."""
    rng = np.random.default_rng(10_000 + seed)
    digit = seed % 10 if digit is None else digit
    base = sample(digit, rng) * (255.0 / 16.0)
    big = base[_cells(HEIGHT)][:, _cells(WIDTH)]
    pixels = big[:, :, None] + rng.normal(0.0, 8.0, size=(HEIGHT, WIDTH, CHANNELS))
    return np.clip(pixels, 0, 255).astype(np.uint8).tobytes(), digit


def features(data: bytes) -> np.ndarray:
    """The 64 features of a frame: mean of each of the 8 x 8 cells, on the 0..16 scale."""
    if len(data) != FRAME_BYTES:
        raise ValueError(f"a frame has {FRAME_BYTES} bytes, got {len(data)}")
    gray = np.frombuffer(data, dtype=np.uint8).reshape(HEIGHT, WIDTH, CHANNELS).mean(axis=2)
    rows, cols = _cells(HEIGHT), _cells(WIDTH)
    sums = np.zeros((GRID, GRID))
    np.add.at(sums, (rows[:, None], cols[None, :]), gray)
    counts = np.bincount(rows)[:, None] * np.bincount(cols)[None, :]
    return (sums / counts * (16.0 / 255.0)).ravel()
