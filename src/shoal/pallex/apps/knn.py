"""Brute-force k-nearest neighbours in numpy (Euclidean, uniform vote).

Ties in the vote go to the smallest label, as scikit-learn's
KNeighborsClassifier does; tests compare every label with it.
"""

from __future__ import annotations

import numpy as np


def predict(train_X: np.ndarray, train_y: np.ndarray, X: np.ndarray, k: int = 5) -> np.ndarray:
    X = np.atleast_2d(np.asarray(X, dtype=float))
    # |x - t|^2 = |x|^2 - 2 x.t + |t|^2; the row term does not change the order.
    d2 = (train_X ** 2).sum(axis=1)[None, :] - 2.0 * X @ train_X.T
    nearest = np.argsort(d2, axis=1, kind="stable")[:, :k]
    votes = train_y[nearest]
    classes = np.unique(train_y)
    counts = (votes[:, :, None] == classes[None, None, :]).sum(axis=1)
    return classes[np.argmax(counts, axis=1)]


def pack(train_X: np.ndarray, train_y: np.ndarray) -> bytes:
    """The model as bytes for a data edge: n, d, then X (float64) and y (int64), little-endian."""
    n, d = train_X.shape
    head = np.array([n, d], dtype="<i8").tobytes()
    return head + np.ascontiguousarray(train_X, dtype="<f8").tobytes() + np.ascontiguousarray(train_y, dtype="<i8").tobytes()


def unpack(data: bytes) -> tuple[np.ndarray, np.ndarray]:
    n, d = (int(v) for v in np.frombuffer(data[:16], dtype="<i8"))
    if len(data) != 16 + 8 * n * d + 8 * n:
        raise ValueError(f"model of {n} x {d} needs {16 + 8 * n * d + 8 * n} bytes, got {len(data)}")
    X = np.frombuffer(data[16:16 + 8 * n * d], dtype="<f8").reshape(n, d)
    y = np.frombuffer(data[16 + 8 * n * d:], dtype="<i8")
    return X, y
