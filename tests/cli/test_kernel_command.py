"""``posfair kernel build`` and ``posfair kernel status``: the ahead-of-time build for images and clusters."""

from __future__ import annotations

import pytest

from posfair_llamaindex.calibration.kernel.kernel_cache import CACHE_ENV, TORCH_CACHE_ENV
from posfair_llamaindex.cli import main
from tests.calibration.kernel.kernel_builds import finished_folders


@pytest.fixture
def cache(monkeypatch, tmp_path):
    monkeypatch.delenv(TORCH_CACHE_ENV, raising=False)
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_build_where_it_is_built_prints_the_folder_and_capability(two_kernel_builds, monkeypatch, capsys):
    root, _ = two_kernel_builds
    monkeypatch.setenv(CACHE_ENV, str(root))
    (folder,) = finished_folders(root)
    assert main(["kernel", "build"]) == 0
    capability = folder.name.split("_")[3].upper()
    assert capsys.readouterr().out.strip() == f"already built for {capability}: {folder}"
    assert main(["kernel", "status"]) == 0
    rows = dict(line.split(None, 1) for line in capsys.readouterr().out.strip().splitlines())
    assert rows["built"] == str(folder) and rows["folder"] == folder.name and rows["cache"] == str(root)


def test_build_without_a_compiler_exits_non_zero_with_the_cause(cache, monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("CXX", str(tmp_path / "no-such-c++"))
    assert main(["kernel", "build"]) == 1
    error = capsys.readouterr().err
    assert "could not be built" in error and f"{tmp_path / 'no-such-c++'}: not found" in error, error
    assert not cache.exists()


def test_status_says_what_is_missing_and_writes_nothing(cache, capsys):
    assert main(["kernel", "status"]) == 0
    rows = dict(line.split(None, 1) for line in capsys.readouterr().out.strip().splitlines())
    assert rows["cache"] == str(cache) and rows["built"].startswith("no")
    assert "-march" not in rows["flags"] and rows["capability"].split()[0] in ("AVX512", "AVX2", "DEFAULT")
    assert not cache.exists()
