"""What a stage loads from storage: real processes, their own /proc/self/smaps and modules."""

from __future__ import annotations

import json
import subprocess
import sys

from shoal.pallex import protocol, storage


def _loaded_after(code: str) -> dict[str, int]:
    out = subprocess.run([sys.executable, "-c", f"{code}\nimport json\nfrom shoal.pallex import storage\n"
                          "print(json.dumps(storage.loaded()))"], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def test_files_are_grouped_by_package_or_kept_whole():
    assert storage.group("/v/lib/python3.11/site-packages/numpy/_core/x.so") == "site-packages/numpy"
    assert storage.group("/usr/lib/python3/dist-packages/numpy/__init__.py") == "dist-packages/numpy"
    assert storage.group("/usr/lib/python3.11/json/__init__.py") == "python3.11 standard library"
    assert storage.group("/usr/lib/x86_64-linux-gnu/libc.so.6") == "/usr/lib/x86_64-linux-gnu/libc.so.6"


def test_a_process_counts_its_mapped_libraries_and_imported_modules():
    bare = _loaded_after("import os")
    assert any(k.startswith("/") and "libc" in k for k in bare), bare   # mapped: resident pages
    stdlib = [k for k in bare if k.endswith("standard library")]
    assert stdlib and bare[stdlib[0]] > 100_000                          # imported: whole .pyc files
    assert not any(k.startswith(("/proc/", "/dev/")) for k in bare)
    with_numpy = _loaded_after("import numpy")
    assert with_numpy.get("site-packages/numpy", 0) > 1_000_000
    assert "site-packages/numpy" not in bare


def test_the_stand_in_camera_s_numpy_is_not_the_capture_stage_s():
    out = subprocess.run([sys.executable, "-m", "shoal.pallex.apps.capture", "--period", "0"],
                         capture_output=True, text=True, check=True)
    (report,) = protocol.parse_reports(out.stdout)
    loaded = report["storage_loaded"]
    assert all(isinstance(v, int) and v > 0 for v in loaded.values())
    assert any(k.endswith("standard library") for k in loaded)
    assert "site-packages/numpy" not in loaded      # imported only to make the synthetic frame
    assert report["stand_in_cpu_s"] > 0
