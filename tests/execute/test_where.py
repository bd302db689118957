"""The one check of where ranks run, as bench, work, study and dsm apply it."""

from __future__ import annotations

import pytest

from shoal.bench.runner import BenchRequest
from shoal.errors import ShoalError
from shoal.execute.where import Where
from shoal.study.request import StudyRequest
from shoal.work import runner as work_runner

INVENTORY = """
[cluster]
mode = "{mode}"

[[nodes]]
name = "board1"
profile = "minnowboard"
slots = 2

[[nodes]]
name = "board2"
profile = "minnowboard"
slots = 2
"""


@pytest.fixture
def inventory(tmp_path):
    def write(mode: str) -> str:
        path = tmp_path / f"{mode}.toml"
        path.write_text(INVENTORY.format(mode=mode))
        return str(path)
    return write


def test_the_tag_says_which_was_given(inventory):
    assert Where().kind == "local"
    assert Where(emulate="2xnuc").kind == "emulated"
    assert Where(cluster=inventory("ssh")).kind == "inventory"
    assert Where(attach="abc123").kind == "attached"
    assert [n.name for n in Where(cluster=inventory("ssh")).inventory().nodes] == ["board1", "board2"]
    assert Where(emulate="3xnuc").inventory().mode == "emulated"


@pytest.mark.parametrize("make", [BenchRequest, lambda **kw: work_runner.WorkRequest(workload="ep", **kw),
                                  Where])
def test_dilation_follows_one_rule_whatever_the_request(make, inventory):
    # Devices emulated here take a dilation, named or from an inventory in emulated mode ...
    make(emulate="2xminnowboard", dilation=2.0).validate()
    make(cluster=inventory("emulated"), dilation=2.0).validate()
    # ... this machine, real hosts and a cluster already up do not.
    for where, says in ((dict(), "add --emulate"), (dict(cluster=inventory("ssh")), "mode 'ssh'"),
                        (dict(attach="abc123"), "shoal cluster up")):
        with pytest.raises(ShoalError, match="--dilation") as refused:
            make(dilation=2.0, **where).validate()
        assert says in str(refused.value)


def test_a_study_checks_its_devices_by_the_same_rule(inventory):
    StudyRequest.create(cluster=inventory("emulated"), dilation=2.0).validate()
    with pytest.raises(ShoalError, match="mode 'ssh'"):
        StudyRequest.create(cluster=inventory("ssh"), dilation=2.0).validate()


@pytest.mark.parametrize("where, says", [
    (dict(emulate="2xnuc", cluster="inv.toml"), "either --emulate or --cluster FILE, not both"),
    (dict(emulate="2xnuc", attach="abc123"), "either --emulate or --attach, not both"),
    (dict(link="gigabit"), "--link sets the link of emulated devices"),
    (dict(nodes="1..2"), "--nodes needs a cluster"),
    (dict(emulate="2xnuc", ranks_per_node=0), "--ranks-per-node must be at least 1"),
    (dict(emulate="2xnuc", power="rapl"), "emulated devices have no sensors"),
    (dict(wait="sleep:abc"), "sleep"),
])
def test_options_that_do_not_fit_together_are_refused(where, says):
    with pytest.raises(ShoalError, match=says):
        Where(**where).validate()
