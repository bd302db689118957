"""Stage: capture one frame and encrypt it with AES-256-GCM (scenario IC&E).

    python -m shoal.pallex.apps.cap_enc [--key-file F] [--out F] [--period S] [--seed K]

Known-answer tests run first; a mismatch fails the stage. The 32-byte key is
read from --key-file (default: a fresh random key, reported by digest only).
The sealed frame (nonce || ciphertext || tag) goes to --out and to every output.
"""

from __future__ import annotations

import argparse
import hashlib
import os

from shoal.pallex.apps import aes
from shoal.pallex.apps.capture import capture
from shoal.pallex.protocol import StageIO


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m shoal.pallex.apps.cap_enc")
    p.add_argument("--key-file", default=None)
    p.add_argument("--out", default=None)
    p.add_argument("--period", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    with StageIO() as io:
        aes.self_test()
        key = open(args.key_file, "rb").read() if args.key_file else os.urandom(32)
        if len(key) != 32:
            raise ValueError(f"AES-256 needs a 32-byte key, {args.key_file} holds {len(key)} bytes")
        data, digit = next(capture(1, args.period, args.seed, io))
        sealed = aes.encrypt(key, data)
        if args.out:
            with open(args.out, "wb") as fh:
                fh.write(sealed)
        for dst in io.output_paths:
            io.send(dst, sealed)
        io.result({"plain_sha256": hashlib.sha256(data).hexdigest(), "sealed_bytes": len(sealed),
                   "sealed_sha256": hashlib.sha256(sealed).hexdigest(), "digit": digit, "self_test": "passed"})


if __name__ == "__main__":
    main()
