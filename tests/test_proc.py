"""The one runner of external commands: lookup, --verbose, whole-tree stop, signals, fakes."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from shoal import proc, verbose
from tests.interrupts import as_foreground

SRC = Path(__file__).resolve().parents[1] / "src"


def _marker() -> str:
    """A sleep duration no other process on the machine uses: finds our processes in /proc."""
    return f"{300 + random.random() * 100:.6f}"


def _with_marker(marker: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
                state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if marker.encode() in argv and state != "Z":
                found.append(int(entry))
    return found


def _gone_by(marker: str, deadline_s: float) -> list[int]:
    """Processes with the marker still alive at the deadline (polled; empty as soon as none)."""
    end = time.monotonic() + deadline_s
    while True:
        left = _with_marker(marker)
        if not left or time.monotonic() > end:
            return left
        time.sleep(0.02)


def _all_started(marker: str, count: int = 3) -> bool:
    """Wait (bounded) until ``count`` processes carry the marker: a process in
    the middle of exec briefly shows an empty command line."""
    end = time.monotonic() + 30
    while len(_with_marker(marker)) < count:
        if time.monotonic() > end:
            return False
        time.sleep(0.02)
    return True


# A tree that hides from a process-group kill: a grandchild in its own process
# group (as Open MPI's launcher puts its ranks), plus a background child.
TREE = textwrap.dedent("""
    import os, subprocess, sys
    subprocess.Popen(["sleep", sys.argv[1]], preexec_fn=lambda: os.setpgid(0, 0))
    subprocess.Popen(["sleep", sys.argv[1]])
    print("started", flush=True)
    os.execvp("sleep", ["sleep", sys.argv[1]])
""")


def test_find_searches_sbin_after_path_and_skips_bad_entries(tmp_path, monkeypatch):
    missing = tmp_path / "not-there"
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    monkeypatch.setenv("PATH", os.pathsep.join([str(missing), str(a_file), "/usr/bin"]))
    ip = proc.find("ip")
    assert ip is not None and os.path.isabs(ip) and ip.startswith(("/usr/sbin", "/sbin", "/usr/bin"))
    assert proc.find("sh") == "/usr/bin/sh"
    assert proc.find("no-such-tool-anywhere") is None


def test_missing_tool_names_the_debian_package(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setattr(proc, "SBIN_DIRS", ())
    with pytest.raises(proc.ToolMissing) as err:
        proc.tool("tc", "link shaping")
    assert str(err.value).startswith("'tc' is needed (link shaping) but was not found on PATH")
    assert str(err.value).endswith("; install the Debian package iproute2 (apt-get install iproute2)")
    with pytest.raises(proc.ToolMissing, match="apt-get install util-linux"):
        proc.run(["unshare", "--help"])


def test_unprivileged_user_finds_sbin_tools_past_an_unreadable_path_entry(tmp_path):
    """As Debian sets it for ordinary users: no sbin on PATH, and one entry they cannot read.
    Root switches to uid 65534; an ordinary user runs it as itself."""
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o000)   # unreadable by uid 65534 and by its owner, unless root
    tmp_path.chmod(0o755)
    script = ("from shoal import proc\n"
              "print(proc.find('ip'))\n"
              "try:\n    proc.tool('no-such-tool-anywhere')\n"
              "except proc.ToolMissing as e:\n    print('missing:', e)\n")
    env = {"PATH": f"{locked}:/usr/local/bin:/usr/bin:/bin", "PYTHONPATH": str(SRC)}
    switch = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] if os.geteuid() == 0 else []
    done = subprocess.run([*switch, sys.executable, "-c", script], capture_output=True, text=True,
                          env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] in ("/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip")
    assert lines[1].startswith("missing: 'no-such-tool-anywhere' is needed but was not found")
    assert "Traceback" not in done.stderr


def test_run_captures_and_checks():
    done = proc.run(["sh", "-c", "echo out; echo one >&2; echo two >&2; exit 3"])
    assert (done.returncode, done.stdout, done.ok) == (3, "out\n", False)
    assert done.tail() == "one | two"
    with pytest.raises(proc.CommandFailed) as err:
        proc.run(["sh", "-c", "echo bad thing >&2; exit 4"], check=True, what="the probe")
    assert str(err.value) == "the probe failed (exit status 4): bad thing"
    assert proc.run(["cat"], input="fed\n").stdout == "fed\n"
    assert proc.run(["printf", "a\\377b"]).stdout == "a\ufffdb"   # not a traceback


def test_verbose_echoes_the_command_with_its_environment(capsys):
    verbose.enable()
    try:
        proc.run(["true", "a b"], env_add={"X": "1 2"})
    finally:
        verbose._enabled = False
    assert capsys.readouterr().err == f"+ X='1 2' {shutil.which('true')} 'a b'\n"


def test_timeout_stops_the_whole_tree():
    marker = _marker()
    started = time.monotonic()
    with pytest.raises(proc.CommandTimeout, match="did not finish within 1 s and was stopped"):
        proc.run([sys.executable, "-c", TREE, marker], timeout=1)
    assert time.monotonic() - started < 60
    # Every sleeper, the one in its own process group included, is gone once run() returns.
    assert _with_marker(marker) == []


def test_a_reason_to_stop_stops_the_whole_tree_and_output_before_it_is_kept():
    marker = _marker()
    asked = []

    def stop_if():
        asked.append(time.monotonic())
        return "h2: ssh did not answer" if len(asked) >= 2 else None

    with pytest.raises(proc.CommandStopped, match="was stopped: h2: ssh did not answer") as stopped:
        proc.run([sys.executable, "-c", TREE, marker], timeout=600, stop_if=stop_if)
    assert stopped.value.reason == "h2: ssh did not answer" and len(asked) == 2
    assert _with_marker(marker) == []
    # Asked between reads, a command that ends keeps all it printed; never asked once it ended.
    done = proc.run([sys.executable, "-c", "import sys, time; print('a'); sys.stdout.flush(); "
                     "time.sleep(1.5); print('b')"], stop_if=lambda: None)
    assert done.ok and done.stdout.split() == ["a", "b"]


def test_process_handle_stops_what_it_started_and_keeps_stderr_tail():
    marker = _marker()
    with proc.start([sys.executable, "-c", TREE, marker], stdout=proc.PIPE) as process:
        assert process.stdout.readline() == "started\n"
        assert _all_started(marker)
    assert _with_marker(marker) == []
    assert process.returncode == -signal.SIGTERM
    failing = proc.start(["sh", "-c", "echo first >&2; echo last >&2; exit 5"], stderr=proc.TAIL)
    assert failing.wait() == 5
    assert failing.stderr_tail() == "first | last"
    assert failing.error_line() == "sh failed (exit status 5): first | last"
    # A rank's error text with the NULs of its buffer: kept as text.
    noisy = proc.start(["sh", "-c", r"printf 'Error: Socket closed\000\000\n' >&2; exit 1"],
                       stderr=proc.TAIL)
    assert noisy.wait() == 1
    assert noisy.stderr_first_errors() == "Error: Socket closed"


def test_a_child_that_ignores_sigterm_is_killed_after_the_grace_period():
    marker = _marker()
    stubborn = ("import signal, subprocess, sys, time\n"
                "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                "print('ready', flush=True)\n"
                f"subprocess.run(['sleep', '{marker}'])\n")
    process = proc.start([sys.executable, "-c", stubborn], stdout=proc.PIPE)
    assert process.stdout.readline() == "ready\n"
    process.stop(grace_s=0.3)
    assert process.returncode == -signal.SIGKILL
    assert _with_marker(marker) == []


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_signal_to_shoal_stops_every_running_command(signum):
    marker = _marker()
    program = textwrap.dedent(f"""
        import sys
        from shoal import proc
        proc.install_signal_handlers()
        try:
            process = proc.start([sys.executable, "-c", {TREE!r}, {marker!r}], stdout=proc.PIPE)
            process.stdout.readline()
            print("running", flush=True)
            process.wait()
        except KeyboardInterrupt as exc:
            print("stopped by", type(exc).__name__, flush=True)
        finally:
            proc.stop_all()
    """)
    shoal = subprocess.Popen([sys.executable, "-c", program], stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONPATH": str(SRC)}, preexec_fn=as_foreground)
    assert shoal.stdout.readline() == "running\n"
    assert _all_started(marker)
    shoal.send_signal(signum)
    out, _ = shoal.communicate(timeout=60)
    expected = "KeyboardInterrupt" if signum == signal.SIGINT else "Terminated"
    assert out == f"stopped by {expected}\n"
    assert _with_marker(marker) == []


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_that_lands_while_a_child_starts_still_stops_the_child(signum):
    # The signal arrives inside Popen, after the fork (the shell of a busy host can be that slow):
    # raised there, nobody would hold the child's handle and it would outlive shoal.
    marker = _marker()
    program = textwrap.dedent(f"""
        import os, signal, subprocess, sys
        from shoal import proc
        proc.install_signal_handlers()
        real = subprocess.Popen

        class SignalledWhileStarting(real):
            def __init__(self, *args, **kwargs):
                super().__init__(*args, **kwargs)
                os.kill(os.getpid(), {int(signum)})
                for _ in range(100):   # the handler runs between these bytecodes
                    pass

        subprocess.Popen = SignalledWhileStarting
        try:
            proc.start([sys.executable, "-c", {TREE!r}, {marker!r}], stdout=proc.PIPE)
            print("not stopped", flush=True)
        except KeyboardInterrupt as exc:
            print("stopped by", type(exc).__name__, flush=True)
        finally:
            proc.stop_all()
    """)
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(SRC)}, preexec_fn=as_foreground)
    expected = "KeyboardInterrupt" if signum == signal.SIGINT else "Terminated"
    assert done.stdout == f"stopped by {expected}\n", done.stderr
    assert _with_marker(marker) == []


def test_tests_can_substitute_a_command():
    seen = []

    def fake(argv, env_add):
        seen.append((argv, env_add))
        return proc.Result(argv, 1, "", "RTNETLINK answers: Operation not permitted")

    with proc.substitute(fake):
        done = proc.run(["ip", "netns", "add", "x"], env_add={"A": "b"})
    assert done.tail() == "RTNETLINK answers: Operation not permitted"
    assert seen == [([proc.find("ip"), "netns", "add", "x"], {"A": "b"})]
    assert proc.run(["true"]).ok  # outside the block commands run for real


def test_only_the_runner_imports_subprocess():
    users = sorted(str(p.relative_to(SRC)) for p in (SRC / "shoal").rglob("*.py")
                   if "import subprocess" in p.read_text() or "from subprocess" in p.read_text())
    allowed = ["shoal/proc.py"]
    assert users == allowed


def test_proc_stat_is_read_in_one_place_and_survives_a_command_name_with_parentheses(tmp_path):
    # Fields as the kernel writes them (proc(5)); the name in parentheses may hold ') '.
    (tmp_path / "4242").mkdir()
    (tmp_path / "4242" / "stat").write_text(
        "4242 (evil) (name) Z 1 4242 4242 0 -1 4194560 100 0 0 0 150 50 7 3 20 0 1 0 987654 "
        "1000000 100 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n")
    info = proc.stat(4242, tmp_path)
    assert (info.state, info.ppid, info.pgrp, info.session) == ("Z", 1, 4242, 4242)
    assert (info.utime, info.stime, info.cutime, info.cstime, info.start) == (150, 50, 7, 3, 987654)
    assert not info.alive
    assert info.cpu_s == 200 / os.sysconf("SC_CLK_TCK")
    assert proc.stat(4243, tmp_path) is None
    me = proc.stat(os.getpid())
    assert me.alive and me.ppid == os.getppid() and me.start > 0
