"""One interface for MPI implementations: names stay inside shoal.mpi, a new MPI is one module."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from shoal.mpi import discover, kinds
from shoal.mpi.launch import HostSlots, Job
from shoal.wait import library

SRC = Path(__file__).resolve().parents[1] / "src" / "shoal"
# Names of implementations, their launchers, daemons and settings.
MPI_WORDS = re.compile(r"\b(mpich\w*|open ?mpi|ompi_\w*|opal_\w*|hydra\w*|prrte|prte\w*|prted|"
                       r"prterun|orterun|orted|mpir_cvar\w*|mca)\b", re.IGNORECASE)


def test_mpi_names_appear_only_inside_the_mpi_package():
    found = []
    for path in sorted(SRC.rglob("*.py")):
        if path.is_relative_to(SRC / "mpi"):
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if MPI_WORDS.search(line):
                found.append(f"{path.relative_to(SRC)}:{number}: {line.strip()}")
    assert found == []


def test_the_bundled_implementations_are_found_in_order():
    assert kinds.names()[:2] == ("mpich", "openmpi")
    assert kinds.default() == "mpich"
    assert kinds.choices_help() == "mpich (default), openmpi, system or a path"
    assert kinds.titles() == "MPICH or Open MPI"
    assert {"mpiexec", "mpirun", "mpiexec.hydra", "prterun"} <= kinds.launcher_names()
    with pytest.raises(Exception, match="unknown MPI 'lam'; shoal knows mpich, openmpi"):
        kinds.get("lam")


def test_each_implementation_builds_its_own_launch_line(mpich, openmpi):
    hosts = [HostSlots("n1", 2), HostSlots("n2", 2)]
    argv, env = Job(mpich, 4, ["prog", "x"], {"A": "1"}, hosts=hosts, launcher_exec="/agent",
                    extra_args=["-v"]).command()
    assert argv == [str(mpich.mpiexec), "-n", "4", "-hosts", "n1:2,n2:2", "-launcher", "ssh",
                    "-launcher-exec", "/agent", "-genv", "A", "1", "-v", "prog", "x"]
    assert env == {}
    argv, env = Job(openmpi, 2, ["prog"], {"A": "1"}).command()
    assert argv == [str(openmpi.mpiexec), "-n", "2", "--map-by", ":OVERSUBSCRIBE", "-x", "A=1",
                    "prog"]
    assert env["OPAL_PREFIX"] == str(openmpi.bindir.parent)
    # A user-written launcher line: only one of the two forwards by name.
    wait = {"SHOAL_WAIT": "backoff", "LD_PRELOAD": "/lib.so"}
    assert library.forwarding_env(wait, mpich) == wait
    assert library.forwarding_env(wait, openmpi)["OMPI_MCA_mca_base_env_list"] == \
        "SHOAL_WAIT;LD_PRELOAD"


def test_open_mpi_leaves_out_fabric_components_only_where_nothing_needs_them(openmpi, tmp_path, monkeypatch):
    """Without an RDMA device and with no component chosen, launches skip libfabric's and
    UCX's probes (a second of every MPI_Init); a device, or the user's choice, keeps them."""
    from shoal.mpi.kinds import openmpi as ompi

    for name in ("OMPI_MCA_btl", "OMPI_MCA_mtl", "OMPI_MCA_pml"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    prefix, sys_root = tmp_path / "prefix", tmp_path / "sys"
    (prefix / "etc").mkdir(parents=True)
    (prefix / "etc" / "openmpi-mca-params.conf").write_text("# btl = tcp,self\n")
    assert not ompi._fabrics_chosen_or_present(prefix, sys_root)
    (sys_root / "class" / "infiniband" / "mlx5_0").mkdir(parents=True)   # as the kernel names one
    assert ompi._fabrics_chosen_or_present(prefix, sys_root)
    empty = tmp_path / "sys-empty"
    (empty / "class" / "infiniband").mkdir(parents=True)
    assert not ompi._fabrics_chosen_or_present(prefix, empty)
    (prefix / "etc" / "openmpi-mca-params.conf").write_text("pml = ucx\n")
    assert ompi._fabrics_chosen_or_present(prefix, empty)
    (prefix / "etc" / "openmpi-mca-params.conf").write_text("")
    monkeypatch.setenv("OMPI_MCA_btl", "self,tcp")
    assert ompi._fabrics_chosen_or_present(prefix, empty)
    assert "OMPI_MCA_btl" not in openmpi.env()    # the user's own setting is not overridden
    monkeypatch.delenv("OMPI_MCA_btl")
    if not ompi._fabrics_chosen_or_present(openmpi.bindir.parent):
        assert openmpi.env()["OMPI_MCA_btl"] == "^ofi,uct" and openmpi.env()["OMPI_MCA_mtl"] == "^ofi"


FAKE_MODULE = textwrap.dedent('''
    """A made-up MPI, to show that one module is all a new MPI needs."""
    import re
    from shoal.mpi.base import Implementation, MPIInstall, tool_output


    class TinyMPI(Implementation):
        kind, title, companion = "tinympi", "Tiny MPI", "tinympi_info"
        launcher_names, setting_prefixes = ("tinyrun",), ("TINY_",)

        def identify(self, bindir):
            if not (bindir / self.companion).exists():
                return None
            text = tool_output([str(bindir / self.companion)])
            found = re.search(r"tiny (\\S+)", text)
            return MPIInstall(self.kind, found.group(1), "tiny-abi", bindir) if found else None

        def launch_args(self, job):
            argv = [str(job.mpi.mpiexec), "--np", str(job.ranks)]
            for key, value in job.rank_env.items():
                argv += ["--env", f"{key}={value}"]
            return argv


    IMPLEMENTATION = TinyMPI()
''')


def test_a_new_mpi_is_one_module(tmp_path, monkeypatch):
    (tmp_path / "tinympi.py").write_text(FAKE_MODULE)
    monkeypatch.setattr(kinds, "__path__", [*kinds.__path__, str(tmp_path)])
    kinds.implementations.cache_clear()
    try:
        install = tmp_path / "tiny" / "bin"
        install.mkdir(parents=True)
        for name, text in (("mpiexec", "#!/bin/sh\necho \"$@\"\n"),
                           ("tinympi_info", "#!/bin/sh\necho 'tiny 1.2'\n")):
            (install / name).write_text(text)
            (install / name).chmod(0o755)
        assert kinds.names() == ("mpich", "openmpi", "tinympi")
        assert "TINY_" in kinds.setting_prefixes() and "tinyrun" in kinds.launcher_names()
        mpi = discover.resolve(str(install))
        assert (mpi.kind, mpi.name, mpi.abi) == ("tinympi", "Tiny MPI 1.2", "tiny-abi")
        done = Job(mpi, 3, ["prog"], {"A": "1"}).run()
        assert done.stdout == "--np 3 --env A=1 prog\n"
        with pytest.raises(Exception, match="expected mpiexec with mpichversion or ompi_info or "
                                            "tinympi_info beside it"):
            discover.resolve(str(tmp_path))
    finally:
        monkeypatch.undo()
        kinds.implementations.cache_clear()
        discover._identify.cache_clear()


def test_a_crash_hydra_reports_behind_a_rank_it_killed_keeps_its_signal():
    """Hydra's report after rank 1 segfaulted, as it printed it here (5 of 30 runs): its
    block names rank 0, which Hydra killed, and only the exit string names the crash."""
    from shoal.bench.sweep import _crash_detail
    from shoal.mpi.kinds import mpich

    said = ["", "=" * 83, "=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES",
            "=   PID 23548 RUNNING AT vm", "=   EXIT CODE: 9",
            "=   CLEANING UP REMAINING PROCESSES", "=   YOU CAN IGNORE THE BELOW CLEANUP MESSAGES",
            "=" * 83, "YOUR APPLICATION TERMINATED WITH THE EXIT STRING: Segmentation fault (signal 11)",
            "This typically refers to a problem with your application."]
    deaths = mpich.IMPLEMENTATION.deaths(said)
    assert [(d.pid, d.signal) for d in deaths] == [(23548, 9), (None, 11)]
    hello = {"hosts": ["vm"] * 3, "pids": [23548, 23549, 23550]}
    detail = _crash_detail(_Silent(), 139, deaths, hello)
    assert detail == "first: a rank killed by SIGSEGV", detail


def test_a_crash_behind_another_ranks_abort_is_named_from_the_ranks_own_signal_report():
    """Open MPI on two emulated devices, rank 1 writing through a null pointer, as it printed
    it here (3 of 4 runs): the launcher reported only rank 0's abort (its socket to rank 1
    closed); the crashed rank's own handler said which signal, with its device and pid."""
    from shoal.bench.sweep import _crash_detail
    from shoal.mpi.kinds import openmpi

    said = ["[nuc2:22008] *** Process received signal ***",
            "[nuc2:22008] Signal: Segmentation fault (11)",
            "[nuc2:22008] Signal code: Address not mapped (1)",
            "[nuc2:22008] Failing at address: (nil)",
            "[nuc2:22008] *** End of error message ***",
            "[nuc1:00000] *** An error occurred in Socket closed",
            "[nuc1:00000] *** MPI_ERRORS_ARE_FATAL (processes in this communicator will now abort,",
            "prterun has exited due to process rank 0 with PID 0 on node nuc1 calling"]
    deaths = openmpi.IMPLEMENTATION.deaths(said)
    assert [(d.pid, d.host, d.signal) for d in deaths] == [(22008, "nuc2", 11)]
    hello = {"hosts": ["nuc1", "nuc2"], "pids": [22007, 22008]}
    detail = _crash_detail(_Silent(), 1, deaths, hello)
    assert detail == "first: rank 1 on nuc2 (pid 22008) killed by SIGSEGV", detail
    # The launcher's own report of the same death is not counted twice.
    also = said + ["prterun noticed that process rank 1 with PID 22008 on node nuc2 exited on",
                   "signal 11 (Segmentation fault)."]
    assert [(d.rank, d.pid, d.signal) for d in openmpi.IMPLEMENTATION.deaths(also)] == [(1, 22008, 11)]


class _Silent:
    """A finished job whose processes wrote nothing on stderr."""

    def stderr_first_errors(self) -> str:
        return ""

    def stderr_tail(self) -> str:
        return ""
