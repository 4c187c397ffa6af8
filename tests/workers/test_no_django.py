"""workers/ runs inside Ray jobs on GPU nodes without the web stack: it must never import Django."""

from __future__ import annotations

import pkgutil
import subprocess
import sys
from pathlib import Path

import workers

ROOT = Path(__file__).resolve().parents[2]


def test_no_workers_module_imports_django_or_the_control_plane():
    modules = [m.name for m in pkgutil.walk_packages(workers.__path__, "workers.")]
    assert "workers.entrypoint" in modules and "workers.report.reporter" in modules
    code = (
        "import importlib, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in {'django', 'controlplane', 'rest_framework'})\n"
        "print(','.join(bad))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120, check=True
    )
    assert result.stdout.strip() == "", f"workers imported {result.stdout.strip()}"
