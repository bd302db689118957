"""The power model: CPU utilisation times a device's idle and busy watts, modelled."""

from __future__ import annotations

from shoal.power.kinds import Kind, Opening, SpecError


def parse_args(arg: str) -> dict:
    """``IDLE_W,BUSY_W[,cores=N][,cgroup=G|,netns=PATH][,link_J_per_B=X]`` to keyword arguments."""
    from shoal.inputs.grammar import NON_NEGATIVE, POSITIVE, GrammarError, number

    out: dict = {}
    numbers = []
    for token in [t.strip() for t in arg.split(",") if t.strip()]:
        key, eq, value = token.partition("=")
        try:
            if not eq:
                numbers.append(number(token, NON_NEGATIVE))
            elif key == "cores":
                out["cores"] = number(value, POSITIVE)
            elif key == "link_J_per_B":
                out["link_J_per_B"] = number(value, NON_NEGATIVE)
            elif key in ("cgroup", "netns"):
                out[key] = value
            else:
                raise SpecError(f"model option {key!r} unknown; use cores=, cgroup=, netns=, link_J_per_B=")
        except GrammarError as exc:
            raise SpecError(f"model: {token!r} {exc}; use model:IDLE_W,BUSY_W") from None
    if len(numbers) not in (0, 2):
        raise SpecError(f"model takes two numbers IDLE_W,BUSY_W, got {len(numbers)} ({arg!r})")
    if numbers:
        if numbers[1] < numbers[0]:
            raise SpecError(f"model: need 0 <= IDLE_W <= BUSY_W, got {numbers[0]:g},{numbers[1]:g}")
        out["idle_W"], out["busy_W"] = numbers
    if "cgroup" in out and "netns" in out:
        raise SpecError("model: give cgroup= or netns=, not both")
    return out


class Model(Kind):
    name, syntax, takes_argument, order = "model", "model[:IDLE_W,BUSY_W]", True, 60
    fix = "give model:IDLE_W,BUSY_W (or a device profile) for your device"

    def check(self, arg: str, item: str) -> None:
        if arg:
            parse_args(arg)

    def open(self, arg: str, at: Opening):
        from shoal.power.model import ModelSource, default_watts

        notes = []
        if not arg:
            name, idle_W, busy_W = default_watts()
            notes.append(f"model without numbers uses a {name} ({idle_W:.3g} W idle, {busy_W:.3g} W "
                         "busy); give model:IDLE_W,BUSY_W for your device")
        return ModelSource(**parse_args(arg), node=at.node), notes


KIND = Model()
