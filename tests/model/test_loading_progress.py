"""Loading a model is quiet unless asked: no "Loading weights" bar each time an embedding is made."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


@pytest.mark.parametrize("show", [False, True])
def test_the_weights_bar_shows_only_when_asked(tiny_model_dir, show):
    code = (
        "import sys; from posfair_llamaindex.encoding.encoder import PosFairEncoder; "
        "from transformers.utils import logging; "
        f"PosFairEncoder(sys.argv[1], device='cpu', show_progress={show}); "
        "assert logging.is_progress_bar_enabled(), 'the process-wide switch was left off'"
    )
    # a user's environment, not the one the command line leaves behind in this test process (it turns bars off)
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_DISABLE_PROGRESS_BARS", "TRANSFORMERS_VERBOSITY")}
    argv = [sys.executable, "-c", code, tiny_model_dir("bert")]
    done = subprocess.run(argv, capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert ("Loading weights" in done.stderr) == show, done.stderr[-2000:]
