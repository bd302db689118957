"""Placing devices on hosts: by CPU budgets against each host's capacity, in the inventory's
order, at one dilation for all (the largest any host needs); and what `cluster up --hosts`
refuses before any host is asked."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from shoal.cluster import hostengine, inventory, multihost
from shoal.cluster.hostspeed import HostSpeed
from shoal.errors import ShoalError


def _offer(name: str, cpus: float, speed: float = 1.0) -> multihost.HostOffer:
    return multihost.HostOffer(name, cpus, HostSpeed.asked(speed))


def _names(placed: dict) -> dict[str, list[str]]:
    return {host: [n.name for n in nodes] for host, nodes in placed.items()}


def test_devices_go_in_order_each_host_taking_its_share_of_the_budget():
    nodes = inventory.from_emulate("8xminnowboard").nodes
    placed = multihost.place(nodes, [_offer("a", 2), _offer("b", 2)])
    assert _names(placed) == {"a": [f"minnowboard{i}" for i in range(1, 5)],
                              "b": [f"minnowboard{i}" for i in range(5, 9)]}
    # A host with three times the room (6 CPUs less 0.5 against 2 less 0.5, 11:3) takes most.
    placed = multihost.place(nodes, [_offer("big", 6), _offer("small", 2)])
    assert [len(v) for v in placed.values()] == [6, 2]
    # A host twice as fast gives each device half the share of its cores: it takes more.
    placed = multihost.place(nodes, [_offer("fast", 2, speed=2.0), _offer("slow", 2)])
    assert len(placed["fast"]) > len(placed["slow"]) and sum(map(len, placed.values())) == 8


def test_one_dilation_for_all_is_the_largest_any_host_needs():
    nodes = inventory.from_emulate("8xminnowboard").nodes
    offers = [_offer("a", 2), _offer("b", 1)]
    placed = multihost.place(nodes, offers)
    fits = multihost.dilations(placed, offers)
    budget = {h: sum(o.budget(n) for n in placed[h]) for h, o in zip(("a", "b"), offers)}
    # Each host's own D: its share's budget over its room (2 - 0.5 and 1 - 0.25), rounded up.
    assert fits == {"a": float(-(-budget["a"] // 1.5)), "b": float(-(-budget["b"] // 0.75))}
    assert max(fits.values()) >= 2


def test_a_host_without_room_gets_no_device():
    nodes = inventory.from_emulate("4xstb").nodes
    placed = multihost.place(nodes, [_offer("a", 2), _offer("none", 0.0)])
    assert _names(placed)["none"] == [] and len(placed["a"]) == 4
    with pytest.raises(ShoalError, match="no host has CPUs left"):
        multihost.place(nodes, [_offer("none", 0.0)])


def test_each_hosts_share_keeps_the_ids_length():
    multihost.check_id("c1a2b3", 9)
    with pytest.raises(ShoalError, match="at most 10 characters"):
        multihost.check_id("abcdefghijk", 2)


def test_an_ssh_engine_starts_one_command_per_host_naming_it():
    engine = hostengine.Engine("ssh", ["h1", "h2"], {"h1": "10.0.0.1", "h2": "10.0.0.2"})
    commands = engine.commands(["python", "-m", "shoal", "cluster", "agent", "probe"])
    assert [c[-2] for c in commands] == ["10.0.0.1", "10.0.0.2"]
    assert [c[-1].split()[-2:] for c in commands] == [["--host", "h1"], ["--host", "h2"]]
    assert hostengine.from_record(engine.describe()) == engine


@pytest.mark.parametrize("hosts, env, said", [
    ("slurm", {}, "not inside a Slurm allocation"),
    ("{inventory}", {}, "give an ssh inventory"),
])
def test_up_over_hosts_refuses_in_one_line(tmp_path, hosts, env, said):
    emulated = tmp_path / "lab.toml"
    emulated.write_text('[cluster]\nmode = "emulated"\n[[nodes]]\nname = "a"\nprofile = "stb"\n')
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    done = subprocess.run([sys.executable, "-m", "shoal", "cluster", "up", "--emulate", "2xstb",
                           "--hosts", hosts.format(inventory=emulated)],
                          capture_output=True, text=True, timeout=60,
                          env={**clean, **env, "SHOAL_STATE_DIR": str(tmp_path / "state")})
    lines = done.stderr.strip().splitlines()
    assert done.returncode != 0 and len(lines) == 1 and said in lines[0], done.stderr
    assert not (tmp_path / "state").exists() or not any((tmp_path / "state").iterdir())


_OTHER_VERSION = ("import sys; from shoal.cluster import agent\n"
                  "for r in agent.read_reports(sys.stdin.read()): agent.say(r.pop(\"host\"), **{**r, \"shoal\": \"0.0.0\"})")


def _ssh_inventory(tmp_path) -> str:
    hosts = tmp_path / "hosts.toml"
    hosts.write_text('[cluster]\nmode = "ssh"\n' + "".join(
        f'[[nodes]]\nname = "{h}"\naddress = "{a}"\nprofile = "nuc"\n'
        for h, a in (("h1", "192.0.2.1"), ("h2", "192.0.2.2"))))
    return str(hosts)


@pytest.mark.parametrize("remote_shell, said", [
    # A host that does not answer (ssh fails): named, with what ssh said.
    ("#!/bin/sh\necho 'ssh: connect to host: No route to host' >&2; exit 255\n",
     "host h1, h2: its agent did not answer (ssh: connect to host: No route to host)"),
    # A host with another shoal: the real agent runs here, its version changed on the way back
    # (its reports read and said again: a long one comes in parts).
    ("#!/bin/sh\nfor last; do :; done\nsh -c \"$last\" | " + sys.executable + " -c '" + _OTHER_VERSION + "'\n",
     "host h1: shoal 0.0.0 there"),
])
def test_a_host_that_is_unreachable_or_has_another_shoal_is_refused_before_anything_is_made(
        tmp_path, remote_shell, said):
    ssh = tmp_path / "ssh"
    ssh.write_text(remote_shell)
    ssh.chmod(0o755)
    state = tmp_path / "state"
    done = subprocess.run([sys.executable, "-m", "shoal", "cluster", "up", "--emulate", "2xstb",
                           "--hosts", _ssh_inventory(tmp_path), "--host-speed", "1"],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "SHOAL_SSH": str(ssh), "SHOAL_STATE_DIR": str(state)})
    lines = done.stderr.strip().splitlines()
    assert done.returncode != 0 and len(lines) == 1 and said in lines[0], done.stderr
    assert not state.exists() or not any(state.iterdir())
