"""The forked children of tests/warm_python.py behave as ``python`` does where the tests look: exit codes, argv,
folder, environment, the traceback of an uncaught error and what prints during shutdown; and whatever a child cannot
reproduce runs in a real subprocess."""

from __future__ import annotations

import subprocess
import sys

import pytest

AT_EXIT = """
import atexit, sys
class Unclosed:
    def __del__(self):
        raise RuntimeError("closed at exit")
kept = Unclosed()
atexit.register(lambda: print("atexit ran"))
print(sys.argv, __name__)
"""


def both(warm_python, args, **kwargs):
    forked = warm_python.run(args, **kwargs)
    real = subprocess.run(args, capture_output=True, text=True, **kwargs)
    return forked, real


def test_a_script_and_its_shutdown_look_as_in_a_fresh_interpreter(warm_python, tmp_path):
    forked, real = both(warm_python, [sys.executable, "-c", AT_EXIT, "one"], cwd=tmp_path)
    assert (
        (forked.returncode, forked.stdout)
        == (real.returncode, real.stdout)
        == (0, "['-c', 'one'] __main__\natexit ran\n")
    )
    for done in (forked, real):
        assert "Exception ignored" in done.stderr and "closed at exit" in done.stderr


@pytest.mark.parametrize(
    ("code", "exit_code", "last_line"),
    [("raise ValueError('boom')", 1, "ValueError: boom"), ("import sys; sys.exit(3)", 3, None)],
)
def test_exit_codes_and_uncaught_errors_are_pythons(warm_python, code, exit_code, last_line):
    forked, real = both(warm_python, [sys.executable, "-c", code])
    assert forked.returncode == real.returncode == exit_code
    if last_line is not None:
        assert forked.stderr.splitlines()[-1] == real.stderr.splitlines()[-1] == last_line
        assert forked.stderr.startswith("Traceback (most recent call last):")


def test_folder_environment_and_module_runs_are_the_requests(warm_python, tmp_path):
    code = "import os; print(os.getcwd(), os.environ.get('POSFAIR_PROBE'))"
    done = warm_python.run([sys.executable, "-c", code], cwd=tmp_path, env={**warm_python.env, "POSFAIR_PROBE": "7"})
    assert done.stdout.split() == [str(tmp_path), "7"]
    script = tmp_path / "script.py"
    script.write_text("import sys; print(sys.argv[1:], __name__)")
    assert warm_python.run([sys.executable, str(script), "a"]).stdout == "['a'] __main__\n"
    done = warm_python.run([sys.executable, "-m", "posfair_llamaindex.cli", "--help"])
    assert done.returncode == 0 and done.stdout.startswith("usage: posfair")


def test_what_a_child_cannot_reproduce_runs_in_a_real_subprocess(warm_python):
    code = [sys.executable, "-c", "print(1)"]
    assert warm_python.forks(code, None, None)
    assert not warm_python.forks(code, {**warm_python.env, "HF_HOME": "/elsewhere"}, None)  # read at import
    assert not warm_python.forks(code, None, "input on stdin")
    assert not warm_python.forks(["bash", "-c", "true"], None, None)
    assert warm_python.run(code, env={**warm_python.env, "HF_HOME": "/elsewhere"}).stdout == "1\n"


def test_a_child_past_its_timeout_is_killed(warm_python):
    with pytest.raises(subprocess.TimeoutExpired):
        warm_python.run([sys.executable, "-c", "import time; time.sleep(60)"], timeout=1)
    assert warm_python.run([sys.executable, "-c", "print('next')"]).stdout == "next\n"  # the server serves on
