"""Without qdrant-edge-py, importing any Edge module fails once, with the line that installs it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from posfair_llamaindex.qdrant.edge_binding import EDGE_REQUIREMENT


@pytest.mark.parametrize("module", ["edge_client", "edge_points", "edge_store"])
def test_a_missing_engine_names_what_to_install(module):
    code = (
        "import sys\n"
        "sys.modules['qdrant_edge'] = None  # what an absent package looks like to the import system\n"
        f"import posfair_llamaindex.qdrant.{module}\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode != 0
    assert f"pip install '{EDGE_REQUIREMENT}'" in done.stderr.splitlines()[-1]


def test_the_requirement_is_the_version_pyproject_pins():
    from pathlib import Path

    pyproject = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text(encoding="utf-8")
    assert f'"{EDGE_REQUIREMENT}"' in pyproject
