"""The README's Python examples run as pasted: each in a process of its own (forked from one that has imported the
model stack: tests/warm_python.py), offline, in an empty folder, and without a traceback on the way out (an unclosed
client's, say)."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

# every README snippet in a child: scheduled first on two workers (conftest.py)
pytestmark = pytest.mark.heavy_group

ROOT = Path(__file__).resolve().parents[1]
DOCS = ("README.md", "docs/STORE_OPTIONS.md")


def python_blocks(document: str) -> list[tuple[str, str]]:
    """(where, code) for every ```python block; a block whose first line is ``# needs: ...`` is left out."""
    text = (ROOT / document).read_text()
    blocks = []
    for match in re.finditer(r"^```python\n(.*?)^```", text, re.M | re.S):
        code = match.group(1)
        if code.lstrip().startswith("# needs:"):
            continue
        line = text[: match.start()].count("\n") + 1
        blocks.append((f"{document}:{line}", code))
    return blocks


BLOCKS = [block for document in DOCS for block in python_blocks(document)]


def test_the_readme_has_its_examples():
    assert len([where for where, _ in BLOCKS if where.startswith("README.md")]) >= 4


@pytest.mark.parametrize("where,code", BLOCKS, ids=[where for where, _ in BLOCKS])
def test_an_example_runs_as_pasted(where, code, tmp_path, warm_python):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    done = warm_python.run([sys.executable, "-c", code], cwd=tmp_path, env=env, timeout=300)
    assert done.returncode == 0, f"{where}\n{done.stderr[-3000:]}"
    assert "Traceback" not in done.stderr, f"{where}\n{done.stderr[-3000:]}"
    if "print(" in code:
        assert done.stdout.strip(), f"{where} printed nothing"
