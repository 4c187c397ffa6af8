"""The wire module is what the web process imports from workers/: it must stay standard library only."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from workers.wire import MAX_STEP, batches, encode_point

ROOT = Path(__file__).resolve().parents[2]


def modules_loaded_by(statement: str) -> set[str]:
    """Top-level names of the modules ``statement`` loads in a fresh interpreter."""
    code = (
        "import sys\n"
        "before = set(sys.modules)\n"
        f"{statement}\n"
        "print(','.join(sorted(m for m in set(sys.modules) - before)))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120, check=True
    )
    return set(filter(None, result.stdout.strip().split(",")))


def test_the_wire_module_imports_only_the_standard_library() -> None:
    loaded = modules_loaded_by("import workers.wire")
    ours = {m for m in loaded if m.split(".")[0] == "workers"}
    assert ours == {"workers", "workers.wire"}
    outside = {m.split(".")[0] for m in loaded} - set(sys.stdlib_module_names) - {"workers"}
    assert outside == set(), f"workers.wire pulls in {sorted(outside)}"


def test_a_report_submodule_does_not_pull_in_the_reporter() -> None:
    loaded = modules_loaded_by("import workers.report.client")
    assert "workers.report.reporter" not in loaded and "workers.report.spool" not in loaded


def test_steps_up_to_the_int64_maximum_encode_as_is() -> None:
    point = encode_point("loss", MAX_STEP, float("nan"), 0.0)
    assert point == {"key": "loss", "step": 2**63 - 1, "value": "NaN", "time": "1970-01-01T00:00:00.000+00:00"}
    assert batches([point] * 5, 2) == [[point] * 2, [point] * 2, [point]]
