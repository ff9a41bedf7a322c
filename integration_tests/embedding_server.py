"""A real OpenAI-compatible embedding server for the tests: infinity-emb serving the offline all-MiniLM-L6-v2.

scripts/embedding_server.sh installs infinity-emb into a virtual environment of its own (CI calls it); here it is
started on a free port of 127.0.0.1, waited for, and stopped. Where it is not installed, :func:`start` skips the
test with the reason; a server that is installed but does not start fails, with the end of its log.
"""

from __future__ import annotations

import os
import socket
import subprocess
import tempfile
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.utils import minilm_path

SERVED_NAME = "all-MiniLM-L6-v2"
START_TIMEOUT_S = 90
ROOT = Path(__file__).resolve().parents[1]


def server_venv() -> Path:
    return Path(os.environ.get("POSFAIR_SERVER_VENV", Path.home() / ".cache" / "posfair-infinity" / "venv"))


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as response:
            return response.status == 200
    except OSError:
        return False


@contextmanager
def start():
    """Yield the server's API base (``http://127.0.0.1:PORT``); stop the server when the block ends."""
    venv = server_venv()
    program = venv / "bin" / "infinity_emb"
    if not (venv / ".posfair-installed").is_file() or not program.is_file():
        pytest.skip(f"infinity-emb is not installed in {venv} (run bash scripts/embedding_server.sh)")
    port = _free_port()
    log = tempfile.NamedTemporaryFile(prefix="infinity-", suffix=".log", delete=False)  # noqa: SIM115 (closed below)
    environment = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "DO_NOT_TRACK": "1",  # infinity-emb's usage statistics: off
        "INFINITY_ANONYMOUS_USAGE_STATS": "0",
        "VIRTUAL_ENV": str(venv),
    }
    command = [
        str(program), "v2", "--model-id", minilm_path(), "--served-model-name", SERVED_NAME,
        "--host", "127.0.0.1", "--port", str(port), "--engine", "torch", "--device", "cpu", "--dtype", "float32",
        "--no-bettertransformer", "--no-model-warmup", "--no-compile",
    ]  # fmt: skip
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=environment, cwd=ROOT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not _answers(base + "/health"):
            if process.poll() is not None or time.monotonic() > deadline:
                tail = Path(log.name).read_text(errors="replace")[-2000:]
                pytest.fail(f"infinity-emb did not start (exit code {process.poll()}); its log ends:\n{tail}")
            time.sleep(0.25)
        yield base
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()
        os.unlink(log.name)
