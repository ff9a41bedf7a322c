"""Child processes without the import bill: a Python that has imported the model stack once forks a child per script.

A test that runs a script in a fresh ``python`` spends most of its time importing torch, transformers, LlamaIndex
and qdrant-client (about 10 s of 13 on two cores). A child forked from a process that has imported them starts with
those modules in memory and none of its parent's other state: its own working folder, environment, ``sys.argv``,
``__main__`` and standard streams. It leaves through the interpreter's ordinary shutdown, so what a script prints on
its way out (an unclosed client's traceback, say) is still seen.

What stays a real subprocess (:meth:`WarmPython.run` hands it to ``subprocess.run``): a command that is not
``python -c``, ``python -m`` or ``python script.py``, one with input on stdin, and one whose environment differs from
the server's in a variable those libraries read when imported (``HF_*``, ``TRANSFORMERS_*``, ``TORCH*``, ...). Tests
about what a fresh interpreter imports (tests/cli/test_import_weight.py, the query child's) use ``subprocess``
themselves.

``python -m tests.warm_python`` is the server: it reads one JSON request per line and answers the child's pid, then
its exit code.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any, Optional

ROOT = Path(__file__).resolve().parents[1]
# what the server imports before it forks: the libraries every script here loads, and the package's heavy modules
PRELOAD = (
    "torch",
    "transformers",
    "llama_index.core",
    "qdrant_client",
    "qdrant_edge",
    "chonkie",
    "posfair_llamaindex.embedding",
    "posfair_llamaindex.qdrant.store",
    "posfair_llamaindex.qdrant.edge_client",
    "posfair_llamaindex.cli",
)
# variables read when those libraries are imported: a request that changes one runs in a real subprocess
IMPORT_TIME_PREFIXES = ("HF_", "HUGGINGFACE", "TRANSFORMERS", "TORCH", "OMP_", "MKL_", "PYTHON", "CUDA", "LD_")
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}


class WarmPython:
    """The test side: starts the server once, and runs each script as ``subprocess.run(..., capture_output=True,
    text=True)`` would, returning a ``CompletedProcess``."""

    def __init__(self) -> None:
        self.env = {**os.environ, **OFFLINE}
        self._server = subprocess.Popen(
            [sys.executable, "-m", "tests.warm_python"],
            cwd=ROOT,
            env=self.env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        atexit.register(self.close)
        ready = self._server.stdout.readline()
        if ready.strip() != "ready":
            self.close()
            raise RuntimeError(f"the warm Python server did not start: {ready!r}")
        self._lock = threading.Lock()

    _shared: Optional[WarmPython] = None

    @classmethod
    def shared(cls) -> WarmPython:
        """One server for the whole session (the tests and integration_tests fixtures both take it)."""
        if cls._shared is None or cls._shared._server.poll() is not None:
            cls._shared = cls()
        return cls._shared

    def forks(self, args: list[str], env: Optional[dict[str, str]], input: Optional[str]) -> bool:
        """Whether ``args`` can run in a forked child (else a real subprocess runs it)."""
        if input is not None or len(args) < 2 or args[0] != sys.executable or self._server.poll() is not None:
            return False
        if args[1] in ("-c", "-m"):
            if len(args) < 3:
                return False
        elif args[1].startswith("-") or not args[1].endswith(".py"):
            return False
        asked = env if env is not None else self.env
        changed = {key for key in set(self.env) | set(asked) if asked.get(key) != self.env.get(key)}
        return not any(key.upper().startswith(IMPORT_TIME_PREFIXES) for key in changed)

    def run(
        self,
        args: list[str],
        *,
        cwd: Optional[os.PathLike] = None,
        env: Optional[dict[str, str]] = None,
        timeout: float = 300,
        input: Optional[str] = None,
    ) -> subprocess.CompletedProcess:
        if not self.forks(args, env, input):
            return subprocess.run(args, cwd=cwd, env=env, input=input, capture_output=True, text=True, timeout=timeout)
        with self._lock, tempfile.TemporaryDirectory() as streams:
            out, err = Path(streams) / "stdout", Path(streams) / "stderr"
            request = {
                "argv": list(args[1:]),
                "cwd": os.fspath(cwd or os.getcwd()),
                "env": dict(env if env is not None else os.environ),
                "stdout": str(out),
                "stderr": str(err),
            }
            self._server.stdin.write(json.dumps(request) + "\n")
            self._server.stdin.flush()
            pid = self._answer(30)["pid"]
            try:
                code = self._answer(timeout)["code"]
            except subprocess.TimeoutExpired:
                os.kill(pid, signal.SIGKILL)
                self._answer(30)
                raise subprocess.TimeoutExpired(args, timeout, out.read_text(), err.read_text()) from None
            return subprocess.CompletedProcess(args, code, out.read_text(), err.read_text())

    def _answer(self, timeout: float) -> dict[str, Any]:
        ready, _, _ = select.select([self._server.stdout], [], [], timeout)
        if not ready:
            raise subprocess.TimeoutExpired("warm python", timeout)
        line = self._server.stdout.readline()
        if not line:
            raise RuntimeError(f"the warm Python server ended (exit code {self._server.wait()})")
        return json.loads(line)

    def close(self) -> None:
        if self._server.stdout.closed:
            return
        if self._server.poll() is None:
            self._server.stdin.close()
            try:
                self._server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._server.kill()
                self._server.wait()
        self._server.stdout.close()


# ---------------------------------------------------------------------------------------------------- the server


def serve() -> None:
    import importlib

    for name in PRELOAD:
        importlib.import_module(name)
    if threading.active_count() != 1:  # a thread would not survive the fork, and a lock it held would hang the child
        raise RuntimeError(f"a preloaded library started a thread: {threading.enumerate()}")
    answer({"ready": True}, raw="ready")
    for line in sys.stdin:
        request = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            run_child(request)  # ends the child through SystemExit: the interpreter's own shutdown
        answer({"pid": pid})
        _, status = os.waitpid(pid, 0)
        answer({"code": os.waitstatus_to_exitcode(status)})


def answer(reply: dict[str, Any], raw: Optional[str] = None) -> None:
    sys.stdout.write((raw if raw is not None else json.dumps(reply)) + "\n")
    sys.stdout.flush()


def run_child(request: dict[str, Any]) -> None:
    """In the forked child: take the request's streams, folder, environment and argv, run it as ``python`` would."""
    import runpy
    import traceback
    import types

    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    os.dup2(os.open(request["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC), 1)
    os.dup2(os.open(request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC), 2)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    argv = request["argv"]
    status = 0
    try:
        if argv[0] == "-c":
            sys.argv = ["-c", *argv[2:]]
            sys.path[0] = ""
            main = types.ModuleType("__main__")
            sys.modules["__main__"] = main
            exec(compile(argv[1], "<string>", "exec"), main.__dict__)
        elif argv[0] == "-m":
            sys.argv = ["-m", *argv[2:]]
            sys.path[0] = os.getcwd()
            runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        else:
            sys.argv = list(argv)
            sys.path[0] = os.path.dirname(os.path.abspath(argv[0]))
            runpy.run_path(argv[0], run_name="__main__")
    except SystemExit:
        raise
    except BaseException:
        traceback.print_exc()
        status = 1
    sys.exit(status)


if __name__ == "__main__":
    serve()
