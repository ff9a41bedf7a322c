"""The compiled all-rows kernel: built where a compiler exists, used where it applies, shared safely by processes
that build at once, are killed mid-build or find it in a read-only cache, and a fallback (with one warning that
names the cause) where it cannot be had."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest
import torch

from posfair_llamaindex.calibration.basket_attention import calibrated_all_rows
from posfair_llamaindex.calibration.config import CalibrationConfig
from posfair_llamaindex.calibration.kernel import fused_kernel, kernel_cache
from tests.calibration.kernel import kernel_builds
from tests.calibration.kernel.kernel_builds import HAS_COMPILER, NO_COMPILER, finished_folders, private_folders
from tests.calibration.test_basket_attention import long_case

# three private kernel builds: scheduled first on two workers (conftest.py)
pytestmark = pytest.mark.heavy_group

POSIX_ONLY = pytest.mark.skipif(os.name == "nt", reason="POSIX shell scripts and flock")
# instructions an AVX2-only CPU does not have: zmm registers, the upper 16 xmm/ymm registers, opmask registers
EVEX_ONLY = re.compile(r"%zmm\d+|%[xy]mm(1[6-9]|2\d|3[01])\b|%k[0-7]\b")


@pytest.fixture
def fresh_cache(monkeypatch, tmp_path):
    """An empty kernel cache for this test alone (through TORCH_EXTENSIONS_DIR) and no kernel loaded yet."""
    monkeypatch.delenv(kernel_cache.CACHE_ENV, raising=False)
    monkeypatch.setenv(kernel_cache.TORCH_CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setenv(fused_kernel.ENV_SWITCH, "1")
    monkeypatch.setattr(fused_kernel, "_loaded", {})
    return tmp_path / "cache"


@pytest.mark.skipif(not HAS_COMPILER, reason=NO_COMPILER)
def test_the_compiled_kernel_builds_and_is_used(monkeypatch):
    assert fused_kernel.module() is not None  # a machine with a compiler must not fall back in silence
    calls = []
    real = fused_kernel.basket_pieces

    def recording(*args):
        calls.append(real(*args))
        return calls[-1]

    monkeypatch.setattr(fused_kernel, "basket_pieces", recording)
    monkeypatch.setenv(fused_kernel.ENV_SWITCH, "1")
    q, k, v, mask, layout = long_case()
    calibrated_all_rows(q, k, v, mask, 0.25, False, layout, CalibrationConfig(basket_size=32))
    assert len(calls) == 1 and calls[0] is not None
    calls.clear()
    calibrated_all_rows(q, k, v, None, 0.25, True, layout, CalibrationConfig(basket_size=32))  # causal
    calibrated_all_rows(
        q.double(), k.double(), v.double(), mask, 0.25, False, layout, CalibrationConfig(basket_size=32)
    )
    assert calls == []  # masks that differ by row, and other dtypes, take the PyTorch path


def test_without_a_compiler_one_warning_names_it_and_the_pytorch_path_runs(fresh_cache, monkeypatch, tmp_path):
    missing = tmp_path / "no-such-c++"
    monkeypatch.setenv("CXX", str(missing))
    q, k, v, mask, layout = long_case()
    config = CalibrationConfig(basket_size=32)
    with pytest.warns(RuntimeWarning) as caught:
        fallback = calibrated_all_rows(q, k, v, mask, 0.25, False, layout, config)
    message = str(caught[0].message)
    assert f"{missing}: not found" in message and "build stopped" not in message, message
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        calibrated_all_rows(q, k, v, mask, 0.25, False, layout, config)  # no second warning
    monkeypatch.setenv(fused_kernel.ENV_SWITCH, "0")
    torch.testing.assert_close(fallback, calibrated_all_rows(q, k, v, mask, 0.25, False, layout, config))
    assert not fresh_cache.exists()  # a build that cannot start writes nothing


@POSIX_ONLY
@pytest.mark.skipif(shutil.which("ninja") is None, reason="needs ninja")
def test_a_compiler_error_is_named_not_ninjas_last_line(fresh_cache, monkeypatch, tmp_path):
    """A real ninja run of torch's build whose compiler fails the way a full disk makes it fail."""
    compiler = tmp_path / "c++"
    compiler.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = "--version" ]; then echo "fake-c++ 1.0"; exit 0; fi\n'
        'echo "In file included from basket_pieces.cpp:11:" >&2\n'
        'echo "basket_pieces.cpp:11:10: fatal error: ATen/core/Tensor.h: No space left on device" >&2\n'
        "exit 1\n"
    )
    compiler.chmod(0o755)
    monkeypatch.setenv("CXX", str(compiler))
    with pytest.warns(RuntimeWarning) as caught:
        assert fused_kernel.module() is None
    message = str(caught[0].message)
    assert "fatal error: ATen/core/Tensor.h: No space left on device" in message, message
    assert "build stopped" not in message and "WARNING" not in message  # nor torch's compiler banner
    assert finished_folders(fresh_cache) == [] and private_folders(fresh_cache) == []


@POSIX_ONLY
@pytest.mark.skipif(not HAS_COMPILER or shutil.which("ninja") is None, reason="needs a C++ compiler and ninja")
def test_a_build_that_outlasts_the_wait_falls_back_with_a_warning_that_says_so(fresh_cache, monkeypatch):
    """Another process holds the build lock (alive, so the OS keeps it held): after the timeout this process runs
    the PyTorch path and says why, instead of waiting forever."""
    monkeypatch.setenv(kernel_cache.LOCK_TIMEOUT_ENV, "0.5")
    lock = kernel_cache.lock_path(fused_kernel.build_config(), fresh_cache)
    fresh_cache.mkdir()
    holder = kernel_builds.hold_lock(lock)
    try:
        q, k, v, mask, layout = long_case()
        config = CalibrationConfig(basket_size=32)
        start = time.monotonic()
        with pytest.warns(RuntimeWarning, match="for more than 0.5 s; this process runs without the kernel") as got:
            fallback = calibrated_all_rows(q, k, v, mask, 0.25, False, layout, config)
        assert time.monotonic() - start < 30
        assert f"pid {holder.pid} on " in str(got[0].message)
    finally:
        holder.kill()
        holder.wait()
    monkeypatch.setenv(fused_kernel.ENV_SWITCH, "0")
    torch.testing.assert_close(fallback, calibrated_all_rows(q, k, v, mask, 0.25, False, layout, config))


def test_the_switch_reads_the_usual_spellings(monkeypatch):
    for value, expected in (("0", False), ("off", False), ("False", False), ("1", True), ("", True)):
        monkeypatch.setenv(fused_kernel.ENV_SWITCH, value)
        assert fused_kernel.enabled() is expected, value


def test_two_processes_that_build_at_once_both_get_a_working_kernel(two_kernel_builds):
    root, children = two_kernel_builds
    reports = [child.report for child in children]
    assert all(report["exact"] for report in reports)
    (folder,) = finished_folders(root)
    assert all(Path(report["file"]).parent == folder for report in reports)
    assert private_folders(root) == []
    builders = [child for child in children if "building the posfair compiled attention kernel once" in child.stderr]
    assert len(builders) == 1, [child.stderr for child in children]  # one builds...
    (waiter,) = [child for child in children if child is not builders[0]]
    assert "is building the posfair compiled attention kernel" in waiter.stderr  # ...the other waits, then loads
    assert re.search(rf"was built in \d+\.\d s; later runs load it from {re.escape(str(folder))}", builders[0].stderr)


def _tree(root: Path) -> dict:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(root.rglob("*"))}


def _writable(root: Path, writable: bool) -> None:
    for path in [root, *root.rglob("*")]:
        mode = path.stat().st_mode
        path.chmod(mode | 0o200 if writable else mode & ~0o222)


def test_a_finished_kernel_in_a_read_only_cache_is_used_without_writing(two_kernel_builds, tmp_path):
    root, _ = two_kernel_builds
    (folder,) = finished_folders(root)
    image = tmp_path / "image"
    shutil.copytree(folder, image / folder.name)
    prefix: tuple = ()
    if os.name != "nt" and os.geteuid() == 0:  # root writes through file modes unless it drops that capability
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root, and setpriv (to drop CAP_DAC_OVERRIDE) is not installed")
        prefix = (setpriv, "--bounding-set=-dac_override,-dac_read_search,-fowner")
    before = _tree(image)
    _writable(image, False)
    try:
        write = "open(__import__('sys').argv[1], 'w')"
        probe = subprocess.run([*prefix, sys.executable, "-c", write, str(image / "x")], capture_output=True)
        assert probe.returncode != 0, "the cache is not read-only for the child"
        child = kernel_builds.finish(kernel_builds.start(image, prefix))
    finally:
        _writable(image, True)
    report = child.report
    assert report["exact"] and Path(report["file"]).parent == image / folder.name
    assert "building" not in child.stderr and "not available" not in child.stderr, child.stderr
    assert _tree(image) == before  # no lock, no folder, nothing


@pytest.fixture(scope="module")
def build_after_a_kill(tmp_path_factory):
    """A child killed with SIGKILL (with its compiler, as a job timeout or a pod eviction kills) while it builds
    the AVX2 kernel, then a fresh child that needs the kernel in the same cache: what the kill left behind, and
    what the fresh child did."""
    if not HAS_COMPILER:
        pytest.skip(NO_COMPILER)
    root = tmp_path_factory.mktemp("killed-build")
    lower = {"ATEN_CPU_CAPABILITY": "avx2"} if kernel_builds.host_capability() in ("AVX2", "AVX512") else {}
    victim = kernel_builds.start(root, **lower)
    try:
        deadline = time.monotonic() + kernel_builds.BUILD_TIMEOUT
        while not list(root.glob("*/build.ninja")):  # torch writes its ninja file just before the compiler runs
            assert victim.poll() is None, victim.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "the build never started"
            time.sleep(0.05)
        time.sleep(1.0)  # the compiler is running
        assert victim.poll() is None, "the build ended before it could be killed"
        os.killpg(victim.pid, signal.SIGKILL)
        victim.wait()
        left = {"finished": finished_folders(root), "private": private_folders(root)}
        fresh = kernel_builds.finish(kernel_builds.start(root, **lower))
    finally:
        kernel_builds.kill_all([victim])
    return root, left, fresh


def test_a_build_killed_midway_blocks_nothing_and_leaves_nothing(build_after_a_kill):
    root, left, fresh = build_after_a_kill
    assert left["finished"] == [] and len(left["private"]) == 1  # the half-built folder never had the final name
    assert fresh.report["exact"]  # the next process neither hung on the dead builder's lock nor loaded its half
    assert "building the posfair compiled attention kernel once" in fresh.stderr
    assert private_folders(root) == [] and len(finished_folders(root)) == 1  # the dead builder's folder is gone


@pytest.mark.skipif(shutil.which("objdump") is None, reason="needs objdump")
def test_the_avx2_kernel_holds_no_avx512_instruction(build_after_a_kill, two_kernel_builds):
    """Built with ATEN_CPU_CAPABILITY=avx2 on any host, the binary runs on a CPU without AVX-512: the flags, not
    the build host, decide its instructions (no -march=native)."""
    if kernel_builds.host_capability() not in ("AVX2", "AVX512"):
        pytest.skip("this CPU has no AVX2")

    def evex(library: Path) -> list:
        listing = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(library)], capture_output=True, text=True)
        assert listing.returncode == 0, listing.stderr
        return [line for line in listing.stdout.splitlines() if EVEX_ONLY.search(line)], listing.stdout.count("%ymm")

    library = Path(build_after_a_kill[2].report["file"])
    assert "avx2" in library.name
    found, ymm = evex(library)
    assert found == [] and ymm > 0, found[:5]  # vectorised for AVX2, and for nothing wider
    if kernel_builds.host_capability() == "AVX512":  # the same check sees AVX-512 where it was asked for
        (folder,) = finished_folders(two_kernel_builds[0])
        assert evex(next(folder.glob("*.so")))[0]
