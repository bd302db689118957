"""A study whose emulated devices ran at the host's speed says so first and recommends nothing."""

from __future__ import annotations

from shoal.report import study_report
from shoal.study import analysis
from shoal.study.findings import Findings, Offload, WorkFindings


def _manifest(device_speed: str | None) -> dict:
    emulation = {"cpu_limit": "none" if device_speed == "host" else "cgroup"}
    if device_speed:
        emulation["device_speed"] = device_speed
    return {"clusters": {"4xminnowboard": {"emulation": emulation}, "reference": {}}}


def test_the_run_manifest_tells_how_fast_the_devices_computed():
    assert analysis.device_speed(_manifest("host")) == "host"
    assert analysis.device_speed(_manifest("profile")) == "profile"
    assert analysis.device_speed({"clusters": {"lab": {"nodes": []}}}) == "device"


def _findings(device_speed: str, host_speed: dict | None = None) -> Findings:
    verdict = {"choice": "local", "reason": "cheaper per byte here"}
    return Findings(run="study-1", cluster_label="4xminnowboard", reference="host", idle_fraction_k=0.5,
                    work=WorkFindings(), tests=[], power=[], overall_optimum={},
                    offload=Offload(3, "the measured best size", verdict, []), measured_points=8,
                    modelled_power=True, unconverged_points=0, device_speed=device_speed,
                    host_speed=host_speed)


def test_host_speed_is_the_first_line_and_no_size_or_offload_is_recommended():
    lines = study_report.headline_lines(_findings("host"))
    assert lines == [study_report.HOST_SPEED]
    assert "no recommendation" in lines[0]
    markdown = study_report._markdown({"study-1": _findings("host")})
    assert markdown.splitlines()[0] == f"**{study_report.HOST_SPEED}**"
    assert "Offload decision" not in markdown


def test_devices_held_to_their_profiles_give_the_offload_decision():
    lines = study_report.headline_lines(_findings("profile"))
    assert any(line.startswith("Offload decision at 3 device(s)") for line in lines)
    assert study_report.HOST_SPEED not in study_report._markdown({"s": _findings("profile")})


def test_a_cluster_and_its_reference_emulated_alike_are_described_once():
    from types import SimpleNamespace
    from pathlib import Path
    alike = {"dilation": 2.0, "link_emulator": "forwarder"}
    run = SimpleNamespace(path=Path("study-1"), manifest={"clusters": {
        "4xminnowboard": {"emulation": dict(alike)}, "4xminnowboard+1xnuc": {"emulation": dict(alike)}}})
    text = study_report._emulation_html(run, None)
    assert text.count("time dilation 2") == 1 and "links by forwarder" in text
    run.manifest["clusters"]["4xminnowboard+1xnuc"]["emulation"]["dilation"] = 3.0
    text = study_report._emulation_html(run, None)
    assert "time dilation 2" in text and "time dilation 3" in text
