"""Stage: classify every received frame with the received KNN model (IC&C's s_clas).

    python -m shoal.pallex.apps.knn_classify [--k 5] [--image-from cap] [--model-from load]
"""

from __future__ import annotations

import argparse

from shoal.pallex.apps import image, knn
from shoal.pallex.protocol import StageIO


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m shoal.pallex.apps.knn_classify")
    p.add_argument("--k", type=int, default=5)
    p.add_argument("--image-from", default="cap")
    p.add_argument("--model-from", default="load")
    args = p.parse_args(argv)
    with StageIO() as io:
        inputs = io.receive()
        X, y = knn.unpack(inputs[args.model_from][0])
        frames = inputs[args.image_from]
        labels = knn.predict(X, y, [image.features(f) for f in frames], args.k)
        io.result({"labels": [int(v) for v in labels]})


if __name__ == "__main__":
    main()
