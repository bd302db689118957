"""A JSON file replaced whole: written beside itself, then renamed over the old one, so a
reader (another shoal process) never sees half of it."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def replace(path: Path, data: Any) -> None:
    """Write ``data`` to ``path`` (its directory made if missing); OSError if it cannot."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    os.replace(tmp, path)
