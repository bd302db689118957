"""The agents' reports as the coordinator reads them from srun's or ssh's output: srun
interleaves long lines of its tasks, so a long report goes in short parts, each line under
500 B, and is put together again whatever lines of other hosts came between its parts."""

from __future__ import annotations

import contextlib
import io
import random

from shoal.cluster import agent


def _said(*reports: tuple[str, dict]) -> list[str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        for host, facts in reports:
            agent.say(host, **facts)
    return out.getvalue().splitlines()


def test_a_long_report_survives_another_hosts_lines_between_its_parts():
    nodes = {f"stb{i}": {"address": f"10.77.0.{i}", "note": 'a "quoted" word'} for i in range(60)}
    one = _said(("h1", {"ready": True, "nodes": nodes}))
    two = _said(("h2", {"built": True}), ("h2", {"ready": True, "nodes": {"stb99": {}}}))
    assert len(one) > 10 and all(len(line.encode()) < 500 for line in one + two)
    rng = random.Random(7)
    mixed = []
    while one or two:
        source = rng.choice([lines for lines in (one, two) if lines])
        mixed.append(source.pop(0))
    reports = agent.read_reports("srun: a word of its own\n" + "\n".join(mixed))
    assert sorted((r["host"], r.get("ready", False)) for r in reports) == [("h1", True), ("h2", False), ("h2", True)]
    assert next(r for r in reports if r["host"] == "h1")["nodes"] == nodes


def test_a_report_with_a_part_missing_is_left_out():
    lines = _said(("h1", {"ready": True, "nodes": {f"n{i}": i for i in range(100)}}))
    assert agent.read_reports("\n".join(lines[:-1])) == []
    assert agent.read_reports("\n".join(lines))[0]["nodes"]["n99"] == 99
