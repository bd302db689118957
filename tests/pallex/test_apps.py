"""Stage programs: AES-256 against NIST vectors, KNN against scikit-learn, uploads over HTTP."""

from __future__ import annotations

import hashlib
import sys

import numpy as np
import pytest
from sklearn.neighbors import KNeighborsClassifier

from shoal.pallex import stagefile
from shoal.pallex.apps import aes, image, knn
from shoal.pallex.cloud import Cloud
from shoal.pallex.runner import Runner


def test_aes_known_answers_match_nist_and_round_trip():
    aes.self_test()  # raises on any mismatch
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

    enc = Cipher(algorithms.AES(bytes(range(32))), modes.ECB()).encryptor()
    assert (enc.update(bytes.fromhex("00112233445566778899aabbccddeeff")) + enc.finalize()).hex() == \
        "8ea2b7ca516745bfeafc49904b496089"  # FIPS-197 C.3
    data, _ = image.frame(3)
    key = bytes(range(32, 64))
    sealed = aes.encrypt(key, data)
    assert sealed != data and aes.decrypt(key, sealed) == data


def test_cap_enc_stage_writes_a_frame_that_decrypts_to_the_original(tmp_path):
    key = tmp_path / "key"
    key.write_bytes(bytes(range(32)))
    out = tmp_path / "sealed"
    app = stagefile.parse({"app": {"name": "e"}, "stages": {"c": {"command": [
        sys.executable, "-m", "shoal.pallex.apps.cap_enc", "--key-file", str(key), "--out", str(out),
        "--period", "0", "--seed", "7"]}}})
    result = Runner(app).run()
    assert result.outcome == "done", result.problems
    assert result.done_reports[0]["result"]["self_test"] == "passed"
    assert aes.decrypt(bytes(range(32)), out.read_bytes()) == image.frame(7)[0]


def test_frames_are_deterministic_and_2_5_MB():
    a, digit = image.frame(5)
    assert len(a) == image.FRAME_BYTES == 2_499_000 and digit == 5
    assert a == image.frame(5)[0] and a != image.frame(6)[0]


def test_knn_labels_equal_scikit_learn_brute_force():
    X, y = image.training_set(1797, seed=0)
    queries = np.stack([image.features(image.frame(s)[0]) for s in range(20)]
                       + [image.sample(d % 10, np.random.default_rng(99 + d)).ravel() for d in range(200)])
    ours = knn.predict(X, y, queries, k=5)
    ref = KNeighborsClassifier(n_neighbors=5, algorithm="brute").fit(X, y).predict(queries)
    assert (ours == ref).all()
    assert (ours[:20] == np.arange(20) % 10).all()  # every frame's digit recognised
    X2, y2 = knn.unpack(knn.pack(X, y))
    assert (X2 == X).all() and (y2 == y).all() and len(knn.pack(X, y)) == 934_456


@pytest.mark.parametrize("count", [1, 3])
def test_upload_scenario_puts_every_frame_to_a_loopback_server(count):
    app = stagefile.resolve(f"icu{count}")
    with Cloud() as cloud:
        result = Runner(app, {"network-online.target": 0.5}, params={"upload_url": cloud.url}).run()
        assert result.outcome == "done", result.problems
        captured = [f["sha256"] for f in result.stages["cap"].report["result"]["frames"]]
        assert [r["sha256"] for r in cloud.received] == captured
        assert captured == [hashlib.sha256(image.frame(n)[0]).hexdigest() for n in range(count)]
        assert [u["status"] for u in result.done_reports[0]["result"]["uploads"]] == [201] * count


def test_classification_scenario_labels_the_captured_digit():
    result = Runner(stagefile.resolve("icc")).run()
    assert result.outcome == "done", result.problems
    assert result.done_reports[0]["result"]["labels"] == [0]
    assert all(e["identical"] for e in result.edges)
