"""A meter that answers JSON over HTTP (a smart plug, a lab meter), measured."""

from __future__ import annotations

import re

from shoal.power.kinds import Kind, Opening, SpecError


class Http(Kind):
    name, aliases, syntax, takes_argument, order = "http", ("https",), "http:URL[#json.path]", True, 40
    bare_prefixes = ("http://", "https://")
    domain, quantity = "wall", "power"
    fix = "give the meter's URL and the JSON path of its watts, e.g. http:http://meter:8080/status#data.power_W"

    def check(self, arg: str, item: str) -> None:
        if not re.match(r"^https?://[^/#\s]+", arg):
            raise SpecError(f"power source {item!r}: give a URL, e.g. http:http://meter:8080/status#data.power_W")

    def open(self, arg: str, at: Opening):
        from shoal.power.httpmeter import HttpMeterSource

        url, _, path = arg.partition("#")
        meter = HttpMeterSource(url, path, node=at.node)
        meter.probe()  # a meter named but not answering is an error, not a silent gap
        return meter, []


KIND = Http()
