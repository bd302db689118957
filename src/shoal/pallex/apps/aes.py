"""AES-256 with known-answer tests run before any real data is touched.

Vectors: FIPS-197 Appendix C.3 (AES-256 block); McGrew & Viega, "The
Galois/Counter Mode of Operation", test cases 13 and 14 (256-bit zero key,
96-bit zero IV). The ``cryptography`` package (OpenSSL) does the work.
"""

from __future__ import annotations

import os

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

FIPS197_C3 = {"key": bytes(range(32)), "plaintext": bytes.fromhex("00112233445566778899aabbccddeeff"),
              "ciphertext": bytes.fromhex("8ea2b7ca516745bfeafc49904b496089")}
GCM_CASES = [  # (key, iv, plaintext, ciphertext + tag)
    (bytes(32), bytes(12), b"", bytes.fromhex("530f8afbc74536b9a963b4f1c4cb738b")),
    (bytes(32), bytes(12), bytes(16),
     bytes.fromhex("cea7403d4d606b6e074ec5d3baf39d18" "d0d1c8a799996bf0265b98b5d48ab919")),
]
NONCE_BYTES = 12


class SelfTestFailed(RuntimeError):
    pass


def self_test() -> None:
    """Raise SelfTestFailed unless every known answer matches."""
    enc = Cipher(algorithms.AES(FIPS197_C3["key"]), modes.ECB()).encryptor()
    if enc.update(FIPS197_C3["plaintext"]) + enc.finalize() != FIPS197_C3["ciphertext"]:
        raise SelfTestFailed("AES-256 FIPS-197 C.3 known answer does not match")
    for n, (key, iv, plain, expected) in enumerate(GCM_CASES, start=13):
        if AESGCM(key).encrypt(iv, plain, None) != expected:
            raise SelfTestFailed(f"AES-256-GCM test case {n} does not match")


def encrypt(key: bytes, data: bytes, nonce: bytes | None = None) -> bytes:
    """nonce || ciphertext || tag."""
    nonce = os.urandom(NONCE_BYTES) if nonce is None else nonce
    return nonce + AESGCM(key).encrypt(nonce, data, None)


def decrypt(key: bytes, blob: bytes) -> bytes:
    return AESGCM(key).decrypt(blob[:NONCE_BYTES], blob[NONCE_BYTES:], None)
