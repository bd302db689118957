"""The study's answer in words: the first lines of summary.md and the report, findings.json's
host speed, and the rows `shoal study` ends with in the terminal."""

from __future__ import annotations

import json

from shoal.report import answer, study_report
from shoal.runs import jsonout
from shoal.study.findings import Findings, Offload
from tests.study.test_work_analysis import _two_workloads

SPEED = {"value": 1.42, "spread": 0.012, "source": "measured", "cpu_model": "AMD EPYC",
         "by_kernel": {"raytrace": 1.42, "videostream": 1.39}, "profiles": {"minnowboard": "mix", "stb": "raytrace"}}


def _findings(noise: float, host_speed: dict | None = None) -> Findings:
    work = _two_workloads(noise)
    head = work.headline["sleeping"]
    verdict = {"choice": "local", "reason": "4.8x less energy per byte on the devices"}
    return Findings(run="study-1", cluster_label="6xboard", reference="nuc", idle_fraction_k=0.5, work=work,
                    tests=[], power=[], overall_optimum={},
                    offload=Offload(head.size, "the measured best size of the workloads, of the range 3–4", verdict,
                                    []),
                    measured_points=36, modelled_power=True, unconverged_points=0, device_speed="profile",
                    host_speed=host_speed)


def test_the_first_lines_name_the_range_the_offload_size_and_the_host_speed():
    f = _findings(0.004, SPEED)
    lines = answer.headline_lines(f)
    assert lines[0].startswith("Best cluster size, sleeping (libshoalwait): 3–4 devices of 1..6 measured")
    assert lines[2].startswith("Offload decision at 3 device(s) (the measured best size of the workloads, "
                               "of the range 3–4): process the data locally on the devices")
    assert lines[3] == ("Host speed 1.42 reference cores on AMD EPYC (raytrace 1.42, videostream 1.39; "
                        "spread 1.2%, measured)")
    summary = study_report._markdown({"study-1": f}).splitlines()
    assert summary[4:8] == [f"- {line}" for line in lines]


def test_findings_json_holds_the_manifests_host_speed_as_it_stands_and_nothing_without_it():
    measured = json.loads(jsonout.dumps(_findings(0.004, SPEED).to_json()))
    assert measured["host_speed"] == SPEED
    assert measured["headline"]["sleeping"]["best_range"]["high"] == 4
    without = _findings(0.004)
    assert "host_speed" not in json.loads(jsonout.dumps(without.to_json()))
    assert not any("Host speed" in line for line in answer.headline_lines(without))
    assert "host speed" not in dict(answer.terminal_rows(without))


def test_the_host_speed_in_detail_names_each_profiles_kernel_and_the_calibrations_warning():
    text = answer.host_speed_text({**SPEED, "warning": "the rounds spread 14%"}, detail=True)
    assert text == ("host speed 1.42 reference cores on AMD EPYC (raytrace 1.42, videostream 1.39; spread 1.2%, "
                    "measured); profiles held on: minnowboard mix, stb raytrace; the rounds spread 14%")
    assert answer.host_speed_text({"value": 0.9, "source": "asked"}) == "host speed 0.9 reference cores (given)"
    assert answer.host_speed_text(None) is None


def test_the_terminal_ends_with_the_answer(capsys):
    from shoal.cli import study

    study._answer(_findings(0.004, SPEED))
    out = capsys.readouterr().out
    flat = " ".join(out.split())
    assert "best size, sleeping 3–4 devices: perf/W within 0.5% of each other (best measured at 3, 1.14x one device's)" in flat
    assert "offload process the data locally on the devices, at 3 device(s) (the measured best of 3–4)" in flat
    assert "host speed 1.42 reference cores on AMD EPYC (raytrace 1.42, videostream 1.39; spread 1.2%, measured)" in flat
    assert "precision 0 of 12 workload points reached their CI target" in flat
    # A clear best is one size, said as such.
    rows = dict(answer.terminal_rows(_findings(0.0005)))
    assert rows["best size, sleeping"] == "3 device(s) (1.14x one device's perf/W)"
    assert rows["offload"] == "process the data locally on the devices, at 3 device(s)"
