"""Old module paths keep working for one release: the same module object, after a DeprecationWarning."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings

from posfair_llamaindex.moved import MOVED_MODULES


def run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-W", "always::DeprecationWarning", "-c", code], capture_output=True, text=True
    )


def test_every_old_path_is_the_new_module_with_a_warning():
    """One process imports every old path (Ray's too, where the extra is installed) and compares the objects."""
    code = (
        "import importlib, json, sys, warnings\n"
        f"moved = {dict(MOVED_MODULES)!r}\n"
        "found = {}\n"
        "for old, new in moved.items():\n"
        "    if 'distributed' in old and importlib.util.find_spec('ray') is None:\n"
        "        continue\n"
        "    with warnings.catch_warnings(record=True) as caught:\n"
        "        warnings.simplefilter('always')\n"
        "        module = importlib.import_module(old)\n"
        "    real = importlib.import_module(new)\n"
        "    found[old] = [module is real, sys.modules[old] is real, real.__spec__.name == new,\n"
        "                  any(f'{old} has moved to {new}' in str(w.message) for w in caught)]\n"
        "print(json.dumps(found))\n"
    )
    done = run(code)
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(found) >= len([old for old in MOVED_MODULES if "distributed" not in old])
    assert {old: checks for old, checks in found.items() if checks != [True, True, True, True]} == {}


def test_the_new_paths_import_without_a_warning():
    code = "import importlib\n" + "\n".join(f"importlib.import_module({new!r})" for new in MOVED_MODULES.values())
    done = subprocess.run(
        [sys.executable, "-W", "error::DeprecationWarning:posfair_llamaindex.moved", "-c", code],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "has moved to" not in done.stderr


def test_the_old_forms_of_import_still_work():
    code = (
        "from posfair_llamaindex import plots, fused_kernel; "
        "from posfair_llamaindex.config import CalibrationConfig; "
        "from posfair_llamaindex.calibration import calibrate_rows, RowLayout; "
        "from posfair_llamaindex.calibration.row_math import calibrate_rows as new; "
        "from posfair_llamaindex.upgrade import UpgradeRefused, UpgradeRefusedError; "
        "import posfair_llamaindex.eval.plots as p; "
        "assert plots is p and calibrate_rows is new and UpgradeRefused is UpgradeRefusedError"
    )
    done = run(code)
    assert done.returncode == 0, done.stderr[-2000:]
    for old in (
        "posfair_llamaindex.plots",
        "posfair_llamaindex.config",
        "posfair_llamaindex.calibration.calibrate_rows",
    ):
        assert f"{old} has moved to" in done.stderr


def test_patching_an_old_path_patches_the_real_module():
    from unittest import mock

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import posfair_llamaindex.model.pooling as pooling

        with mock.patch("posfair_llamaindex.pooling.pool_hidden_states", "patched"):
            assert pooling.pool_hidden_states == "patched"


def test_the_map_names_only_modules_that_exist():
    import importlib.util

    for new in MOVED_MODULES.values():
        assert importlib.util.find_spec(new) is not None, new
    for old in MOVED_MODULES:
        assert old not in {m.name for m in sys.meta_path if hasattr(m, "name")}
