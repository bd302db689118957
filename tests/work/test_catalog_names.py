"""`shoal work` names its workloads from the catalog (the program's --list), never from a
list of its own: a made-up catalog is what the error and --list show."""

from __future__ import annotations

import pytest

from shoal import cli
from shoal.errors import ShoalError
from shoal.work import catalog, runner

MADE_UP = (catalog.Workload("sumsq", "op", "1000", "10", "sum of squares"),
           catalog.Workload("zigzag", "key", "64", "8", "zigzag sort"))


@pytest.fixture
def made_up(monkeypatch):
    asked = []

    def workloads(mpi):
        asked.append(mpi)
        return MADE_UP

    monkeypatch.setattr(runner, "workloads", workloads)
    return asked


def test_a_missing_name_is_answered_with_the_catalog_s_names(made_up, capsys):
    assert cli.main(["work", "--mpi", "mpich"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == "shoal: name a workload; known: sumsq, zigzag (shoal work --list)\n"
    assert made_up == ["mpich"]


def test_list_shows_the_catalog(made_up, capsys):
    assert cli.main(["work", "--list"]) == 0
    out = capsys.readouterr().out
    assert "sumsq" in out and "sum of squares" in out and "zigzag" in out and "--size 64 (small: 8)" in out
    assert made_up == [None]


def test_an_unknown_name_lists_the_catalog_s_names():
    with pytest.raises(ShoalError, match=r"^unknown workload 'raytrace'; known: sumsq, zigzag "
                                        r"\(shoal work --list\)$"):
        catalog.find(MADE_UP, "raytrace")


def test_the_help_names_no_workload(capsys):
    """(--aes says which workload it is for; the help lists none of them.)"""
    for argv in (["--help"], ["work", "--help"]):
        with pytest.raises(SystemExit):
            cli.main(argv)
        text = capsys.readouterr().out
        assert "--list" in text
        for name in ("raytrace", "msa", "videostream", "ray tracing", "sequence alignment"):
            assert name not in text, (argv, name)
