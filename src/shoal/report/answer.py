"""The study's answer in words: the lines summary.md and the report open with, and the short
rows `shoal study` ends with in the terminal. Only wording; the numbers come from the
findings (shoal.study.findings)."""

from __future__ import annotations

from typing import Any

from shoal import render
from shoal.study.findings import Findings, Headline

CHOICE = {"local": "process the data locally on the devices",
          "offload": "ship the data to the datacenter",
          "neither": "neither option keeps up with the data stream"}

HOST_SPEED = ("The emulated devices ran at this host's speed, not their profiles' (no CPU limit "
              "could be applied here): their times say nothing about the devices, so this run "
              "makes no recommendation.")

CONDITIONS = ("sleeping", "spinning")


def host_speed_text(speed: dict[str, Any] | None, detail: bool = False) -> str | None:
    """The run's recorded host speed in words (shoal.render.host_speed: "host speed 1.42
    reference cores on AMD EPYC (raytrace 1.42, ...; spread 1.2%, measured)"); None when the
    run has none. ``detail`` adds the kernel each profile's speed is held by, and the
    calibration's warning or note."""
    if not speed or speed.get("value") is None:
        return None
    text = render.host_speed(speed)
    if detail:
        profiles = speed.get("profiles") or {}
        if profiles:
            text += "; profiles held on: " + ", ".join(f"{p} {k}" for p, k in profiles.items())
        text += "".join(f"; {speed[k]}" for k in ("warning", "note") if speed.get(k))
    return text


def precision_text(f: Findings) -> str:
    """"1 of 20 workload points reached ±3%" (empty without workload points)."""
    p = f.precision
    if p is None or not p.points:
        return ""
    target = f" ±{p.ci_target:.0%}" if p.ci_target is not None else " their CI target"
    return f"{p.converged} of {p.points} workload points reached{target} (95 % CI of the median time)"


def offload_line(f: Findings) -> str:
    verdict = f.offload.verdict
    return (f"Offload decision at {f.offload.nodes_used} device(s) ({f.offload.nodes_from}): "
            f"{CHOICE[verdict['choice']]} — {verdict['reason']}")


def headline_lines(f: Findings) -> list[str]:
    """The first lines of a study's answer (plain text): sizes that were measured, the offload
    decision, and this host's measured speed when the run recorded it."""
    speed = host_speed_text(f.host_speed)
    tail = [speed[0].upper() + speed[1:]] if speed else []
    if f.device_speed == "host":
        return [HOST_SPEED, *tail]
    if f.headline:
        lines = [f"Best cluster size, {h.text}" for h in (f.headline.get(c) for c in CONDITIONS) if h is not None]
    else:
        lines = [f"Best cluster size from the benchmarks: {optimum_text(f.overall_optimum)}"]
    return [*lines, offload_line(f), *tail]


def size_text(h: Headline) -> str:
    """A headline's size in a few words: the range, "≥ N" or the best, with what backs it."""
    span = h.best_range
    if h.size is None or span is None:
        return h.text
    base = "one device's" if h.smallest_measured in (None, 1) else f"{h.smallest_measured} devices'"
    if span.tied:
        return (f"{span.text()}: perf/W within {span.within:.1%} of each other "
                f"(best measured at {h.size}, {h.gain:.2f}x {base})")
    if h.at_least:
        return f"≥ {h.size} devices: perf/W still rising at N = {h.size} ({h.rising_by:+.1%} over the next smaller)"
    return f"{span.text()} ({h.gain:.2f}x {base} perf/W)"


def terminal_rows(f: Findings) -> list[tuple[str, str]]:
    """(what, answer) rows for the end of `shoal study` in the terminal."""
    rows: list[tuple[str, str]] = []
    if f.device_speed == "host":
        rows.append(("no answer", HOST_SPEED))
    else:
        for cond in CONDITIONS:
            h = f.headline.get(cond)
            if h is not None:
                rows.append((f"best size, {cond}", size_text(h)))
        if not f.headline:
            rows.append(("best size", optimum_text(f.overall_optimum)))
        rows.append(("offload", f"{CHOICE[f.offload.verdict['choice']]}, at {f.offload.nodes_used} device(s)"
                                + _of_range(f)))
    speed = host_speed_text(f.host_speed)
    if speed:
        rows.append(("host speed", speed.removeprefix("host speed ")))
    if precision_text(f):
        rows.append(("precision", precision_text(f)))
    return rows


def _of_range(f: Findings) -> str:
    """" (the measured best of 2–4)" when the offload size is the best of a tied range."""
    head = f.headline.get("sleeping")
    span = head.best_range if head is not None else None
    if span is None or not span.tied or head.size != f.offload.nodes_used:
        return ""
    return f" (the measured best of {span.low}–{span.high})"


def optimum_text(opt: dict[str, Any] | None) -> str:
    """A benchmark's (or the overall) optimum in words."""
    if not opt:
        return "no fit"
    measured = (f"; best measured perf/W at {opt['n_best_measured']} node(s)"
                if opt.get("n_best_measured") else "")
    if opt["status"] == "unbounded":
        return f"no limit in range: {opt['reason']}{measured}"
    if opt["status"] != "ok":
        return f"cannot tell: {opt['reason']}{measured}"
    largest = opt.get("n_max_measured")
    if opt.get("extrapolated") and largest:
        # Only what was measured is a recommendation; the model's figure stays a suggestion.
        return (f"≥ {largest}: the model's perf/W is still within {opt['tolerance']:.0%} of its best "
                f"beyond the measured node counts; model suggests ~{opt['n_recommended']}{measured}")
    text = f"recommended {opt['n_recommended']} node(s)"
    if opt.get("n_recommended_range"):
        lo, hi = opt["n_recommended_range"]
        text += f" (range {lo}..{hi})"
    text += f"; best perf/W at {opt['n_best_efficiency']}"
    if opt.get("extrapolated"):
        text += " (beyond the measured node counts: predicted)"
    return text + measured
