"""Stage: load the KNN model and send it (scenario IC&C's s_load).

    python -m shoal.pallex.apps.knn_load [--model FILE.npz] [--samples N] [--seed K]

The model is a training matrix and its labels: from --model (arrays X, y),
else the seeded digit set of image.py (1797 x 64, like the classic set).
"""

from __future__ import annotations

import argparse

import numpy as np

from shoal.pallex.apps import image, knn
from shoal.pallex.protocol import StageIO


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m shoal.pallex.apps.knn_load")
    p.add_argument("--model", default=None)
    p.add_argument("--samples", type=int, default=1797)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    with StageIO() as io:
        if args.model:
            with np.load(args.model) as z:
                X, y = z["X"], z["y"]
        else:
            X, y = image.training_set(args.samples, args.seed)
        blob = knn.pack(X, y)
        for dst in io.output_paths:
            io.send(dst, blob)
        io.result({"samples": int(X.shape[0]), "features": int(X.shape[1]), "bytes": len(blob)})


if __name__ == "__main__":
    main()
