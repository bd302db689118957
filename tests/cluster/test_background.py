"""What emulated devices keep doing beside their ranks (`--background stb=mpeg2-sd`): the
decoder's frame rhythm and the head-end's stream as real processes, the refusals, the slack
verdict on kernel-shaped samples, and a device carrying a background on its first core and
its plant while a real MPI job computes beside it."""

from __future__ import annotations

import csv
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from shoal import cluster, profiles
from shoal.cluster import background, inventory, linkemu, slack, state
from shoal.errors import ShoalError

host_namespaces = pytest.mark.skipif(os.geteuid() != 0, reason="clusters in the host's namespaces need root; an ordinary user's boards keep decoding "
                                   "(--background minnowboard=mpeg2-sd) in tests/user/test_as_ordinary_user.py::test_bench_on_emulated_devices_with_a_users_path")


def _counters(process: subprocess.Popen, path: Path) -> dict:
    before = path.stat().st_mtime_ns if path.exists() else 0
    process.send_signal(signal.SIGUSR1)
    for _ in range(500):
        if path.exists() and path.stat().st_mtime_ns != before:
            return json.loads(path.read_text())
        time.sleep(0.01)
    raise AssertionError(f"{path} was not written")


def _free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_decoder_works_each_frame_in_its_rhythm_and_takes_what_the_stream_brings(tmp_path):
    program = str(background.binary())
    port = _free_udp_port()
    period, work = 0.02, 0.004
    decoder = subprocess.Popen([program, "decode", "--port", str(port), "--period-s", str(period),
                                "--work-s", str(work), "--stats", str(tmp_path / "d.json")],
                               stdout=subprocess.PIPE, text=True)
    sender = subprocess.Popen([program, "send", "--to", f"127.0.0.1:{port}", "--rate-bps", "2e6",
                               "--stats", str(tmp_path / "s.json")], stdout=subprocess.PIPE, text=True)
    try:
        assert decoder.stdout.readline().strip() == "ready"
        assert sender.stdout.readline().strip() == "ready"
        seen = {"frames": 0, "received_B": 0}
        while seen["frames"] < 5 or seen["received_B"] == 0:   # however loaded the host
            time.sleep(0.05)
            seen = _counters(decoder, tmp_path / "d.json")
        sent = _counters(sender, tmp_path / "s.json")
    finally:
        decoder.send_signal(signal.SIGTERM)
        sender.send_signal(signal.SIGTERM)
        decoder.wait(timeout=30)
        sender.wait(timeout=30)
    # Never ahead of its rhythm; every frame's work done on its own CPU clock.
    assert seen["frames"] + seen["dropped"] <= seen["wall_s"] / period + 1
    assert seen["cpu_s"] >= seen["frames"] * work
    assert seen["late"] <= seen["frames"] and seen["buffer_s"] == 0
    # MPEG-2 over UDP: whole datagrams of seven transport-stream packets, no more than was sent.
    assert seen["received_B"] == 1316 * seen["datagrams"]
    assert sent["sent_B"] == 1316 * sent["datagrams"]
    final = json.loads((tmp_path / "s.json").read_text())
    assert seen["received_B"] <= final["sent_B"]
    assert final["sent_B"] <= 2e6 / 8 * final["wall_s"] + 1316   # never ahead of its rate


def test_a_background_folds_into_the_devices_and_is_described():
    spec = background.with_background("2xstb+1xxeon-blade", {"stb": "mpeg2-sd"})
    assert spec == "2xstb@mpeg2-sd+1xxeon-blade"
    nodes = inventory.from_emulate(spec, "docsis-27m").nodes
    assert nodes[0].describe()["background"] == {"name": "mpeg2-sd", "fps": 29.97,
                                                 "frame_work_s": 3.17e-5, "stream_bps": 3.75e6,
                                                 "delivery": "multicast"}
    assert "background" not in nodes[2].describe()
    # Sourced as 10 % of a box core: what it takes of a box, and of a blade.
    assert nodes[0].background.share_of(nodes[0].profile) == pytest.approx(0.10, rel=0.01)
    assert nodes[0].background.share_of(nodes[2].profile) < 0.003
    # A frame may be shown up to the MPEG-2 MP@ML buffer's worth of the stream late: 0.49 s.
    assert background.buffer_s(nodes[0].background) == pytest.approx(1835008 / 3.75e6)
    assert background.parse("stb=mpeg2-sd, nuc=mpeg2-sd-qam") == {"stb": "mpeg2-sd", "nuc": "mpeg2-sd-qam"}
    # A clock given beside it still finds the terms without one.
    from shoal.profiles import clock

    assert clock.with_clock("2xminnowboard@mpeg2-sd-qam", "500M") == "2xminnowboard@mpeg2-sd-qam@500M"


def test_backgrounds_that_leave_no_room_are_refused_in_one_line(tmp_path, monkeypatch):
    with pytest.raises(ShoalError, match=r"--background nuc=mpeg2-sd: --emulate 2xstb has no nuc devices"):
        background.with_background("2xstb", {"nuc": "mpeg2-sd"})
    with pytest.raises(ShoalError, match=r"unknown background \(known: mpeg2-sd, mpeg2-sd-qam, mpeg2-sd-vod"):
        background.with_background("2xstb", {"stb": "mpeg4-hd"})
    with pytest.raises(ShoalError, match=r"already gives stb a background"):
        background.with_background("2xstb@mpeg2-sd", {"stb": "mpeg2-sd-qam"})
    # One stream each down the plant: 7 fit its 27 Mbit/s, 8 do not; one multicast copy does.
    inventory.from_emulate("7xstb@mpeg2-sd-vod")
    with pytest.raises(ShoalError, match=r"8 streams of their own \(at most 7 fit\) need 30 Mbit/s "
                                         r"down docsis-27m, whose downstream carries 27"):
        inventory.from_emulate("8xstb@mpeg2-sd-vod")
    inventory.from_emulate("128xstb@mpeg2-sd")
    inventory.from_emulate("128xstb@mpeg2-sd-qam")   # its own carriers: nothing on the plant
    # A decoder in software, as a box without a video engine would need: more than a box core.
    user = tmp_path / "mine.toml"
    user.write_text("[backgrounds.mpeg2-soft]\nfps = 25\nframe_work_s = 0.004\nstream_bps = 4e6\n"
                    "delivery = \"qam\"\n")
    monkeypatch.setenv("SHOAL_PROFILES", str(user))
    with pytest.raises(ShoalError, match=r"background mpeg2-soft needs 10.53 of a stb core .* more "
                                         r"than the core's whole budget"):
        inventory.from_emulate("2xstb@mpeg2-soft")
    inventory.from_emulate("1xnuc@mpeg2-soft")   # a tenth of a NUC core


def _core(tasks: dict[int, tuple[float, float, int]], periods: int) -> slack.CoreSample:
    return slack.CoreSample(nr_periods=periods, tasks=tasks)


def _sample(t: float, core0: slack.CoreSample) -> slack.Sample:
    return slack.Sample(t, 0, 0, 0, 1, None, cores={"stb1": [core0, _core({}, 0)]})


def test_ranks_short_of_their_core_beside_a_background_are_flagged_not_hidden():
    quota = 0.001   # per 100 ms period
    decoder, rank = 41, 42
    # 1 s, 10 periods: the core's budget is 10 ms. The decoder took 2 ms; the rank wanted to
    # run the whole second (compute-bound) and got the other 8 ms.
    first = _sample(0.0, _core({decoder: (0.0, 0.0, 0), rank: (0.0, 0.0, 0)}, 0))
    last = _sample(1.0, _core({decoder: (0.002, 0.0, 30), rank: (0.008, 0.992, 10)}, 10))
    verdict = slack.judge(first, last, 2, core_quotas={"stb1": quota}, stretch=[first, last],
                          backgrounds={"stb1": (0, decoder)})
    got = verdict["backgrounds"]["stb1"]
    assert got["share"] == pytest.approx(0.2)
    assert got["ranks_lost"] == pytest.approx(0.2)   # the ranks wanted all of it
    columns = slack.row_columns(verdict)
    assert columns["background_slack"] == "short"
    assert columns["background_cpu_share"] == pytest.approx(0.2)
    assert "stb1 core 0: its ranks wanted all of the core's budget and its background took 20%" \
        in columns["background_note"]
    # A rank that waits for messages (it wanted 3 ms and got them) loses nothing to it.
    waiting = _sample(1.0, _core({decoder: (0.002, 0.0, 30), rank: (0.003, 0.0002, 4)}, 10))
    verdict = slack.judge(first, waiting, 2, core_quotas={"stb1": quota}, stretch=[first, waiting],
                          backgrounds={"stb1": (0, decoder)})
    assert slack.row_columns(verdict)["background_slack"] == "ok"
    # No background anywhere: no columns, so a run made before them resumes with its header.
    assert "background_slack" not in slack.row_columns(slack.judge(first, last, 2))
    # A core held from user space has no quota to read: the background is said unmeasured.
    held = slack.judge(first, last, 2, core_quotas={"stb1": 0.0}, stretch=[first, last],
                       backgrounds={"stb1": (0, decoder)})
    columns = slack.row_columns(held)
    assert columns["background_slack"] == "unmeasured" and columns["background_cpu_share"] is None
    assert columns["background_note"].startswith("1 device's background not measured")
    # A core in a cgroup with no pair of samples to judge (a task ended between the only two)
    # has no verdict: blank, not said to be held from user space.
    gone = _sample(1.0, _core({decoder: (0.002, 0.0, 30)}, 10))
    blank = slack.row_columns(slack.judge(first, gone, 2, core_quotas={"stb1": quota}, stretch=[first, gone],
                                          backgrounds={"stb1": (0, decoder)}))
    assert "background_slack" not in blank


def _heavy_background(tmp_path: Path) -> Path:
    """A background that takes half of a NUC core (its stream multicast down the plant)."""
    nuc = profiles.load()["nuc"]
    path = tmp_path / "profiles.toml"
    path.write_text("[backgrounds.half-core]\nfps = 25\n"
                    f"frame_work_s = {0.5 * nuc.speed / 25!r}\nstream_bps = 3.75e6\n"
                    "delivery = \"multicast\"\n")
    return path


@host_namespaces
def test_a_device_decodes_on_its_first_core_and_the_stream_crosses_the_plant(mpich, tmp_path, monkeypatch):
    monkeypatch.setenv("SHOAL_PROFILES", str(_heavy_background(tmp_path)))
    with cluster.open(emulate="1xnuc@half-core", link="docsis-27m", calibrate=False) as c:
        record = state.read(c.emulated.id)
        entry = record["nodes"]["nuc1"]["background"]
        device_ns = os.stat(state.NETNS_DIR / record["nodes"]["nuc1"]["netns"]).st_ino
        assert os.stat(f"/proc/{entry['pid']}/ns/net").st_ino == device_ns
        # On the device's first core, inside its quota.
        groups = Path(f"/proc/{entry['pid']}/cgroup").read_text()
        assert any(Path(g).name == "core0" and g.rsplit("/", 2)[-2] == "nuc1"
                   for g in (line.split(":", 2)[2] for line in groups.splitlines())), groups
        [stream] = record["background_streams"]
        head_ns = os.stat(state.NETNS_DIR / record["head"]["netns"]).st_ino
        assert os.stat(f"/proc/{stream['pid']}/ns/net").st_ino == head_ns
        assert stream["destinations"] == ["239.77.0.1:5004"]
        # A real MPI job computing on the same core through the CLI (attached): its rows carry
        # the background's share and say the rank was short of its core for it.
        done = subprocess.run([sys.executable, "-m", "shoal", "work", "raytrace", "--attach",
                               c.emulated.id, "--size", "512", "--reps", "1", "--mpi", "mpich",
                               "--json"], capture_output=True, text=True, timeout=300,
                              env={**os.environ, "SHOAL_RUNS": str(tmp_path / "runs")})
        assert done.returncode == 0, done.stderr[-2000:]
        seen = background.counters(record)
        plant = linkemu.stats(record["forwarder"], state.cluster_dir(c.emulated.id) / "forwarder.json")
    decoded = seen["devices"]["nuc1"]
    assert decoded["frames"] > 0 and decoded["cpu_s"] >= decoded["frames"] * entry["work_s"]
    assert 0 < decoded["received_B"] <= seen["streams"]["half-core"]["sent_B"]
    # The stream came down the plant's downstream to the box (port 1; port 0 is the head's).
    assert plant["ports"][1]["down"]["wire_bytes"] >= decoded["received_B"]
    [results] = (tmp_path / "runs").rglob("results.csv")
    # The run's manifest says what the box's decoder did while it ran.
    kept = json.loads((results.parent / "manifest.json").read_text())["backgrounds"]["devices"]["nuc1"]
    assert 0 < kept["frames"] <= decoded["frames"] and kept["received_B"] <= decoded["received_B"]
    rows = list(csv.DictReader(results.open()))
    assert rows and all(r["background_slack"] in ("ok", "short") for r in rows)
    judged = [r for r in rows if r["background_cpu_share"]]
    assert judged, rows
    assert all(r["background_slack"] == "short" and "nuc1 core 0" in r["background_note"] for r in judged)
    assert all(0.1 < float(r["background_cpu_share"]) < 0.9 for r in judged)   # about half


@host_namespaces
def test_an_upload_crosses_the_plants_upstream_to_the_head_end_from_the_devices_first_core():
    """Another subscriber's upload (``@subscriber-upload``): its sender on the device's first
    core, held to the device's service flow on the plant's upstream, counted where it arrives."""
    with cluster.open(emulate="1xstb+1xstb@subscriber-upload", link="docsis-27m", calibrate=False) as c:
        record = state.read(c.emulated.id)
        [uploader] = [name for name, entry in record["nodes"].items() if entry.get("background")]
        entry = record["nodes"][uploader]["background"]
        assert entry["delivery"] == "upload" and entry["upload_to"] == f"{record['head']['address']}:5004"
        groups = Path(f"/proc/{entry['pid']}/cgroup").read_text()
        assert any(Path(g).name == "core0" and g.rsplit("/", 2)[-2] == uploader
                   for g in (line.split(":", 2)[2] for line in groups.splitlines())), groups
        assert "background_streams" not in record   # nothing comes down to the boxes
        seen = {}
        for _ in range(100):   # until a few of its datagrams have come up the plant
            seen = background.counters(record)
            if seen["uploads_received"].get("head", {}).get("datagrams", 0) >= 5:
                break
            time.sleep(0.1)
        plant = linkemu.stats(record["forwarder"], state.cluster_dir(c.emulated.id) / "forwarder.json")
    sent, received = seen["devices"][uploader], seen["uploads_received"]["head"]
    assert received["datagrams"] >= 5 and received["received_B"] <= sent["sent_B"]
    assert sent["rate_bps"] == pytest.approx(entry["rate_bps"], rel=1e-5)
    port = 1 + sorted(record["nodes"]).index(uploader)   # port 0 is the head's
    assert plant["ports"][port]["up"]["wire_bytes"] >= received["received_B"]
    assert plant["ports"][port]["up"]["rate_bps"] == pytest.approx(5.12e6 / record["dilation"], rel=0.01)
    assert plant["ports"][1 if port == 2 else 2]["up"]["wire_bytes"] < received["received_B"]
