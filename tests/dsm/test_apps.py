"""Hough and Videostream: the S-DSM, plain-MPI and sequential programs give
the same bytes (7 ranks on a 2-core machine: more ranks than cores)."""

import pytest

from shoal.dsm import apps

HOUGH = ["--size", "48", "--thetas", "90", "--sample", "0"]
VIDEO = ["--frames", "5", "--thetas", "30", "--sample", "0"]


def _out(tmp_path, name):
    d = tmp_path / name
    d.mkdir()
    return d


@pytest.mark.parametrize("kind, mode", [("mpich", "backoff"), ("openmpi", "backoff"),
                                        ("openmpi", "linear:0,1000,1")])
def test_hough_outputs_are_identical(request, kind, mode, tmp_path):
    any_mpi = request.getfixturevalue(kind)
    runs = {}
    for impl, ranks in (("seq", 1), ("mpi", 5), ("sdsm", 7)):
        out = _out(tmp_path, impl)
        runs[impl] = (apps.run(any_mpi, "hough", [*HOUGH, "--out", str(out)], ranks, mode,
                               impl=impl), out)
    ref_acc = (runs["seq"][1] / "accumulator.bin").read_bytes()
    ref_img = (runs["seq"][1] / "lines.pgm").read_bytes()
    assert any(ref_acc) and b"\xff" in ref_img          # lines were found
    for impl in ("mpi", "sdsm"):
        assert (runs[impl][1] / "accumulator.bin").read_bytes() == ref_acc
        assert (runs[impl][1] / "lines.pgm").read_bytes() == ref_img
        assert runs[impl][0].output_hash() == runs["seq"][0].output_hash()
    sdsm = runs["sdsm"][0]
    assert [r["role"] for r in sdsm.ranks] == ["server", "server", "io"] + ["task"] * 4
    # contention by design: tasks write accumulator lines many times
    assert sum(r["msgs_sent"] for r in sdsm.role("task")) > 500


# busy under Open MPI only: MPICH's seven spinning ranks on 2 cores take minutes
@pytest.mark.parametrize("kind, mode", [("openmpi", "busy"), ("openmpi", "backoff"),
                                        ("mpich", "backoff"), ("openmpi", "linear:0,1000,1"),
                                        ("mpich", "linear:0,1000,1")])
def test_videostream_outputs_are_identical(request, kind, mode, tmp_path):
    any_mpi = request.getfixturevalue(kind)
    files = {}
    hashes = {}
    for impl, ranks in (("seq", 1), ("mpi", 6), ("sdsm", 7)):
        path = tmp_path / f"{impl}.raw"
        res = apps.run(any_mpi, "video", [*VIDEO, "--out", str(path)], ranks, mode, impl=impl)
        files[impl] = path.read_bytes()
        hashes[impl] = res.output_hash()
        if impl == "sdsm":
            sdsm = res
    assert len(files["seq"]) == 5 * 1280 * 720
    assert files["mpi"] == files["seq"] and files["sdsm"] == files["seq"]
    assert hashes["mpi"] == hashes["sdsm"] == hashes["seq"]
    roles = [r["role"] for r in sdsm.ranks]
    assert roles == ["server", "input", "output"] + ["task"] * 4
    assert sum(r["frames"] for r in sdsm.role("output")) == 5
