"""The cluster's file server (`--storage xeon-blade=seed002-nas`): the server as a real process
on loopback speaking its protocol, the options folded into the devices, and a real MPI job on
emulated devices whose rank 0 writes the ray tracer's image through its link to the head."""

from __future__ import annotations

import csv
import json
import os
import socket
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from shoal import profiles
from shoal.cluster import inventory, storage
from shoal.errors import ShoalError
from shoal.study.request import StudyRequest

WRITE_BPS, BLOCK_B, DILATION = 2e6, 4096, 3.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture()
def server(tmp_path):
    port = _free_port()
    process = subprocess.Popen([sys.executable, "-m", "shoal.cluster.storage", "--port", str(port),
                                "--write-Bps", str(WRITE_BPS), "--block-B", str(BLOCK_B),
                                "--dilation", str(DILATION), "--files", str(tmp_path / "files"),
                                "--stats", str(tmp_path / "stats.json")], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout.readline().strip() == "ready"
        yield port, tmp_path
    finally:
        process.terminate()
        process.wait(timeout=30)


def _lines(sock: socket.socket) -> str:
    out = b""
    while not out.endswith(b"\n"):
        piece = sock.recv(1)
        assert piece, "the server closed the connection"
        out += piece
    return out.decode().strip()


def test_the_server_acknowledges_each_block_once_committed_and_keeps_every_byte(server):
    port, where = server
    data = os.urandom(3 * BLOCK_B + 123)   # three whole blocks and a short one
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(f"STORE image.ppm {len(data)}\n".encode())
        assert _lines(sock) == f"BLOCK {BLOCK_B}"
        acks = 0
        for at in range(0, len(data), BLOCK_B):
            sock.sendall(data[at:at + BLOCK_B])
            assert sock.recv(1) == b"k"   # the next block waits for this one's commit
            acks += 1
        assert _lines(sock) == f"DONE {len(data)} {zlib.crc32(data)}"
    assert acks == 4
    assert (where / "files" / "image.ppm").read_bytes() == data
    stats = json.loads((where / "stats.json").read_text())
    assert (stats["files"], stats["bytes"], stats["blocks"]) == (1, len(data), 4)
    # Each block held for its bytes at the storage's rate, D times on the host.
    assert stats["commit_host_s"] == pytest.approx(len(data) / WRITE_BPS * DILATION)


@pytest.mark.parametrize("header", [b"STORE ../etc/passwd 10\n", b"STORE a.ppm lots\n", b"PUT a.ppm 10\n"])
def test_a_bad_request_is_answered_err_and_writes_nothing(server, header):
    port, where = server
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(header)
        assert _lines(sock).startswith("ERR ")
    assert not any((where / "files").iterdir())


def test_storage_folds_into_the_devices_and_the_reference():
    assert storage.with_storage("2xstb+1xxeon-blade", {"xeon-blade": "seed002-nas"}) == \
        "2xstb+1xxeon-blade@storage=seed002-nas"
    nodes = inventory.from_emulate("1xstb+2xxeon-blade@storage=seed002-nas").nodes
    assert [n.storage.name if n.storage else None for n in nodes] == [None, "seed002-nas", "seed002-nas"]
    assert nodes[1].describe()["storage"] == {"name": "seed002-nas", "write_Bps": 1.97e6, "block_B": 32768}
    # A study gives it to the reference's blades as to the cluster's devices.
    request = StudyRequest.create(emulate="8xstb", reference="2xxeon-blade", storage={"xeon-blade": "seed002-nas"})
    assert (request.emulate, request.reference.term) == ("8xstb", "2xxeon-blade@storage=seed002-nas")
    with pytest.raises(ShoalError, match="a term carries one storage"):
        inventory.from_emulate("1xnuc@storage=seed002-nas@storage=seed002-nas")
    with pytest.raises(ShoalError, match=r"already gives stb a storage; give it once"):
        storage.with_storage("2xstb@storage=seed002-nas", {"stb": "seed002-nas"})


def test_the_seed002_nas_writes_the_seeds_blade_images_in_their_serial_time():
    """The derivation in its source: 0.398 s and 6.39 s of serial time at 512² and 2048²."""
    nas = profiles.load_storage()["seed002-nas"]
    for side, serial_s in ((512, 0.398), (2048, 6.39)):
        image_B = len(f"P6\n{side} {side}\n255\n") + 3 * side * side
        assert image_B / nas.write_Bps == pytest.approx(serial_s, rel=0.02)


def _work(*args: str) -> None:
    """shoal work in a process of its own (an ordinary user's moves into a user namespace)."""
    done = subprocess.run([sys.executable, "-m", "shoal", "work", "raytrace", "--mpi", "mpich", *args],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr


def _results(out: Path) -> list[dict]:
    with (out / "results.csv").open() as fh:
        return list(csv.DictReader(fh))


def test_rank_0_writes_the_image_to_the_head_through_its_link_and_every_byte_is_checked(tmp_path, mpich):
    side = 64
    image_B = len(f"P6\n{side} {side}\n255\n") + 3 * side * side
    # Rank 0 on a device with the NAS: its image crosses the device's link to the head.
    out = tmp_path / "nas"
    _work("--size", str(side), "--check", "--reps", "2", "--emulate", "2xminnowboard@storage=seed002-nas",
          "--nodes", "2", "--out", str(out))
    rows = _results(out)
    assert [r["check"] for r in rows] == ["pass", "pass"]
    assert all(json.loads(r["extra"])["stored_B"] == image_B for r in rows)
    # The commits are sleeps at the NAS's rate, in device time: never shorter.
    assert all(float(r["serial_s"]) >= image_B / 1.97e6 for r in rows)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["storage"]["seed002-nas"]["files"] == 2
    assert manifest["storage"]["seed002-nas"]["bytes"] == 2 * image_B
    # A cluster brought up once and attached to keeps its file server.
    name = f"st{os.getpid() % 100000}"
    subprocess.run([sys.executable, "-m", "shoal", "cluster", "up", "--emulate", "2xminnowboard@storage=seed002-nas",
                    "--name", name], check=True, capture_output=True, timeout=600)
    try:
        out = tmp_path / "attached"
        _work("--size", str(side), "--reps", "1", "--attach", name, "--nodes", "2", "--out", str(out))
        assert json.loads(_results(out)[0]["extra"])["stored_B"] == image_B
    finally:
        subprocess.run([sys.executable, "-m", "shoal", "cluster", "down", name], capture_output=True, timeout=300)
    # Rank 0 on a device without one: the image stays in memory, the server gets nothing.
    out = tmp_path / "memory"
    _work("--size", str(side), "--reps", "1", "--emulate", "1xminnowboard+1xminnowboard@storage=seed002-nas",
          "--nodes", "2", "--out", str(out))
    assert json.loads(_results(out)[0]["extra"])["stored_B"] == 0
    assert json.loads((out / "manifest.json").read_text())["storage"]["seed002-nas"]["files"] == 0
