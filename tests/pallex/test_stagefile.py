"""Stage files: good ones load; each kind of bad one gives one line naming the stage, exit 2."""

from __future__ import annotations

import pytest

from shoal.pallex import stagefile

GOOD = """
[app]
name = "t"
deadline_s = 10
[stages.a]
command = ["/bin/true"]
[stages.b]
command = ["/bin/true"]
needs = ["a"]
[[edges]]
from = "a"
to = "b"
bytes = 10
"""

BAD = {
    "cycle": ('[app]\nname="t"\n[stages.a]\ncommand=["/bin/true"]\nneeds=["b"]\n'
              '[stages.b]\ncommand=["/bin/true"]\nneeds=["a"]\n', "dependency cycle"),
    "unknown dependency": ('[app]\nname="t"\n[stages.a]\ncommand=["/bin/true"]\nneeds=["zz"]\n',
                           "stage 'a' needs unknown stage 'zz'"),
    "missing command": ('[app]\nname="t"\n[stages.a]\nneeds=[]\n', "stages.a.command: is missing; every stage needs a command"),
    "edge without dependency": ('[app]\nname="t"\n[stages.a]\ncommand=["/bin/true"]\n[stages.b]\ncommand=["/bin/true"]\n'
                                '[[edges]]\nfrom="a"\nto="b"\nbytes=1\n', "stage 'b' does not list 'a' in needs"),
    "negative deadline": ('[app]\nname="t"\ndeadline_s=-5\n[stages.a]\ncommand=["/bin/true"]\n', ":3: app.deadline_s: must be above 0, got -5"),
    "not toml": ("[app\nname=", "not valid TOML"),
}


def test_good_file_loads_with_order_sinks_and_ordering_needs(tmp_path):
    path = tmp_path / "good.toml"
    path.write_text(GOOD)
    app = stagefile.load(path)
    assert app.order == ["a", "b"]
    assert app.sinks() == ["b"]
    assert app.ordering_needs("b") == []  # carried by the data edge
    assert app.socket_path(app.edges[0]) == "/run/pallex/t/a-b.sock"


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_file_one_line_exit_2(case, tmp_path, shoal):
    text, expected = BAD[case]
    path = tmp_path / f"{case.replace(' ', '_')}.toml"
    path.write_text(text)
    proc = shoal("pallex", "check", str(path))
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr
    assert expected in lines[0]


def test_waits_for_cycle_without_a_needs_cycle_is_refused():
    # a sends to c; c also needs b (no data: waits for b to exit); b needs a (waits for a to exit).
    # a exits only once c has read, so nobody ever moves, though the needs graph is acyclic.
    data = {"app": {"name": "t"}, "stages": {
        "a": {"command": ["/bin/true"]}, "b": {"command": ["/bin/true"], "needs": ["a"]},
        "c": {"command": ["/bin/true"], "needs": ["a", "b"]}},
        "edges": [{"from": "a", "to": "c", "bytes": 1}]}
    with pytest.raises(stagefile.StageFileError, match="would wait for each other forever"):
        stagefile.parse(data)
    data["edges"].append({"from": "b", "to": "c", "bytes": 1})  # now b's need is data too: fine
    assert stagefile.parse(data).ordering_needs("c") == []


def test_all_scenarios_load():
    for name in stagefile.SCENARIOS:
        app = stagefile.resolve(name)
        assert app.name == name and app.sinks()
    assert stagefile.resolve("icu3").stages["upl"].requires_units == ("network-online.target",)
