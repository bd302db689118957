"""Workload results against outside references: Biopython's pairwise scores,
the `cryptography` package's AES-256-CTR, scikit-learn's brute-force KNN,
numpy's Hough transform, and the serial render of the ray tracer."""

from __future__ import annotations

import numpy as np
import pytest

from work_helpers import launch, work_program


def read_fasta(path):
    names, seqs = [], []
    for line in path.read_text().splitlines():
        if line.startswith(">"):
            names.append(line[1:])
            seqs.append("")
        else:
            seqs[-1] += line.strip()
    return names, seqs


def test_msa_pairwise_scores_equal_biopython(mpich, work_programs, tmp_path):
    from Bio.Align import PairwiseAligner

    code, results, stderr = launch(mpich, work_program(mpich, work_programs), 3,
                                   ["--runs", "msa:S12-L40", "--check", "--output", str(tmp_path)])
    assert code == 0, stderr
    assert results["msa"]["check"] == "pass"
    _, seqs = read_fasta(tmp_path / "sequences.fasta")
    scores = np.loadtxt(tmp_path / "scores.tsv", dtype=int)
    # The scheme in msa.c: match 2, mismatch -1, a gap of k positions -5 - 2(k-1), end gaps alike.
    aligner = PairwiseAligner(mode="global", match_score=2, mismatch_score=-1,
                              open_gap_score=-5, extend_gap_score=-2)
    # The gap convention pinned by hand: AAAA vs AA is one gap of 2 (-5 - 2) plus 2 matches (+4).
    assert aligner.score("AAAA", "AA") == -3
    assert len(seqs) == 12 and len(set(seqs)) > 6
    for i in range(len(seqs)):
        for j in range(i + 1, len(seqs)):
            assert scores[i, j] == aligner.score(seqs[i], seqs[j]), (i, j)
    # The final alignment holds every input sequence, gaps removed, in equal-length rows.
    names, rows = read_fasta(tmp_path / "alignment.fasta")
    assert len({len(r) for r in rows}) == 1
    assert {n: r.replace("-", "") for n, r in zip(names, rows)} == {f"s{i}": s for i, s in enumerate(seqs)}
    # The guide tree names every sequence once.
    tree = (tmp_path / "tree.nwk").read_text()
    assert sorted(int(tok) for tok in __import__("re").findall(r"s(\d+)", tree)) == list(range(12))


@pytest.mark.parametrize("aes", ["openssl", "software"])
def test_edge_encryption_and_labels_equal_the_references(mpich, work_programs, tmp_path, aes):
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
    from sklearn.neighbors import KNeighborsClassifier

    code, results, stderr = launch(mpich, work_program(mpich, work_programs), 2,
                                   ["--runs", "edge:6@64x48", "--check", "--aes", aes,
                                    "--output", str(tmp_path)])
    assert code == 0, stderr
    result = results["edge"]
    # The check includes FIPS-197 C.3 and SP 800-38A F.5.5 with the implementation in use.
    assert result["check"] == "pass", result["check_detail"]
    assert result["extra"]["aes"] == ("openssl-evp" if aes == "openssl" else "software")
    plain = (tmp_path / "image0.rgb").read_bytes()
    assert len(plain) == 64 * 48 * 3
    key = bytes(range(32))
    encryptor = Cipher(algorithms.AES(key), modes.CTR(bytes(16))).encryptor()  # image 0: counter 0
    assert (tmp_path / "image0.aes").read_bytes() == encryptor.update(plain) + encryptor.finalize()

    train = np.loadtxt(tmp_path / "knn_train.tsv", dtype=np.int64)
    query = np.loadtxt(tmp_path / "labels.tsv", dtype=str)
    features = query[:, 3:].astype(np.int64)
    labels = query[:, 1].astype(int)
    # Distances are integers; make sure no tie at the 5th neighbour makes the reference ambiguous.
    d = ((features[:, None, :] - train[None, :, 1:]) ** 2).sum(axis=2)
    nearest = np.sort(d, axis=1)
    assert (nearest[:, 4] < nearest[:, 5]).all()
    knn = KNeighborsClassifier(n_neighbors=5, algorithm="brute").fit(train[:, 1:], train[:, 0])
    assert (knn.predict(features) == labels).all()


def test_raytrace_image_is_the_serial_render(openmpi, work_programs, tmp_path):
    program = work_program(openmpi, work_programs)
    images = {}
    for ranks in (1, 4):
        out = tmp_path / str(ranks)
        out.mkdir()
        code, results, stderr = launch(openmpi, program, ranks,
                                       ["--runs", "raytrace:40x30", "--check", "--output", str(out)])
        assert code == 0, stderr
        assert results["raytrace"]["check"] == "pass"
        images[ranks] = (out / "image.ppm").read_bytes()
    assert images[1] == images[4]
    header, pixels = images[1][:len(b"P6\n40 30\n255\n")], images[1][len(b"P6\n40 30\n255\n"):]
    assert header == b"P6\n40 30\n255\n" and len(pixels) == 40 * 30 * 3
    # A real picture: many colours, not a blank frame.
    assert len({pixels[i:i + 3] for i in range(0, len(pixels), 3)}) > 100


def hough_lines(frame, top=8, ntheta=720):
    """The videostream kernel in numpy: Sobel, fixed-point Hough, picks with suppression."""
    img = frame.astype(np.int64)
    h, w = img.shape
    p = lambda dy, dx: img[1 + dy:h - 1 + dy, 1 + dx:w - 1 + dx]  # noqa: E731
    gx = (p(-1, 1) + 2 * p(0, 1) + p(1, 1)) - (p(-1, -1) + 2 * p(0, -1) + p(1, -1))
    gy = (p(1, -1) + 2 * p(1, 0) + p(1, 1)) - (p(-1, -1) + 2 * p(-1, 0) + p(-1, 1))
    ys, xs = np.nonzero(np.abs(gx) + np.abs(gy) >= 160)
    ys, xs = ys + 1, xs + 1
    angles = np.pi * np.arange(ntheta) / ntheta
    cos_q = np.array([int(np.floor(abs(c) * 4096 + 0.5)) * (1 if c >= 0 else -1) for c in np.cos(angles)])
    sin_q = np.array([int(np.floor(abs(s) * 4096 + 0.5)) * (1 if s >= 0 else -1) for s in np.sin(angles)])
    nrho = 2 * (int(np.ceil(np.hypot(w, h))) + 2) + 1
    acc = np.zeros((nrho, ntheta), dtype=np.int64)
    rho = ((xs[:, None] * cos_q[None, :] + ys[:, None] * sin_q[None, :]) >> 12) + nrho // 2
    np.add.at(acc, (rho, np.broadcast_to(np.arange(ntheta), rho.shape)), 1)
    lines = []
    for _ in range(top):
        r, t = np.unravel_index(np.argmax(acc), acc.shape)
        lines.append((r - nrho // 2, t, acc[r, t]))
        acc[max(r - 8, 0):r + 9, [(tt + ntheta) % ntheta for tt in range(t - 8, t + 9)]] = 0
    return lines


def test_videostream_lines_equal_numpy(mpich, work_programs, tmp_path):
    code, results, stderr = launch(mpich, work_program(mpich, work_programs), 3,
                                   ["--runs", "videostream:96x64x6", "--check", "--output", str(tmp_path)])
    assert code == 0, stderr
    assert results["videostream"]["check"] == "pass"
    raw = (tmp_path / "frame0.pgm").read_bytes()
    frame = np.frombuffer(raw[len(b"P5\n96 64\n255\n"):], dtype=np.uint8).reshape(64, 96)
    lines = np.loadtxt(tmp_path / "lines.tsv", dtype=int)
    got = [tuple(row[1:]) for row in lines[lines[:, 0] == 0]]
    assert got == hough_lines(frame)
