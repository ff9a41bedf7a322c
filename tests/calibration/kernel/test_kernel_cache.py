"""The kernel cache's rules, each without a compile: flags per capability, what the folder name depends on,
where the cache is, the lock a dead owner cannot hold, and the one line that says why a build failed."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import time

import pytest
import torch

from posfair_llamaindex.calibration.kernel import fused_kernel, kernel_cache
from posfair_llamaindex.calibration.kernel.kernel_cache import KernelBuildError, KernelLockTimeoutError
from tests.calibration.kernel import kernel_builds
from tests.calibration.kernel.kernel_builds import HAS_COMPILER

ATEN_AVX512 = {"-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512dq", "-mfma"}  # cmake/Codegen.cmake


def test_flags_are_atens_own_for_each_capability_and_never_march_native():
    for kind in ("gcc", "clang", "other", "msvc"):
        for capability in ("AVX512", "AVX2", "DEFAULT"):
            cflags, ldflags = kernel_cache.compile_flags(capability, kind)
            assert not any("march" in flag for flag in (*cflags, *ldflags)), (kind, capability)
            assert any(flag.endswith(f"CPU_CAPABILITY={capability}") for flag in cflags)
    avx512, _ = kernel_cache.compile_flags("AVX512", "gcc")
    assert {f for f in avx512 if f.startswith("-m")} == ATEN_AVX512
    avx2, _ = kernel_cache.compile_flags("AVX2", "gcc")
    assert {"-mavx2", "-mfma", *kernel_cache.GCC_AVX2_FLAGS} == {f for f in avx2 if f.startswith("-m")}
    clang_avx2, _ = kernel_cache.compile_flags("AVX2", "clang")
    assert {f for f in clang_avx2 if f.startswith("-m")} == {"-mavx2", "-mfma"}  # GCC's split flags are GCC's
    default, _ = kernel_cache.compile_flags("DEFAULT", "gcc")
    assert not any(f.startswith("-m") for f in default)
    assert "/arch:AVX2" in kernel_cache.compile_flags("AVX2", "msvc")[0]


def test_capabilities_without_atens_avx_kernels_get_the_portable_build():
    assert [kernel_cache.build_target(c) for c in ("AVX512", "avx2", "DEFAULT", "NO AVX", "SVE256", "ZVECTOR")] == [
        "AVX512",
        "AVX2",
        "DEFAULT",
        "DEFAULT",
        "DEFAULT",
        "DEFAULT",
    ]


def _compiler(tmp_path, version: str):
    script = tmp_path / f"cxx-{abs(hash(version))}"
    script.write_text(f'#!/bin/sh\necho "{version}"\n')
    script.chmod(0o755)
    return str(script)


@pytest.mark.skipif(os.name == "nt", reason="a POSIX shell script stands in for a compiler")
def test_the_folder_name_changes_with_everything_the_binary_depends_on(monkeypatch, tmp_path):
    monkeypatch.setenv("CXX", _compiler(tmp_path, "g++ (GCC) 12.2.0"))
    base = fused_kernel.build_config()
    same = fused_kernel.build_config()
    assert same.name == base.name and base.name.startswith(f"posfair_basket_pieces_{base.capability.lower()}_")
    names = {}
    names["capability"] = kernel_cache.spec_for(
        fused_kernel.BASE_NAME, fused_kernel.SOURCE, "AVX2" if base.capability != "AVX2" else "AVX512"
    ).name
    edited = tmp_path / "basket_pieces.cpp"
    edited.write_text(fused_kernel.SOURCE.read_text() + "// one more line\n")
    names["source"] = kernel_cache.spec_for(fused_kernel.BASE_NAME, edited).name
    with monkeypatch.context() as patch:
        patch.setenv("CXX", _compiler(tmp_path, "g++ (GCC) 13.1.0"))
        names["compiler"] = fused_kernel.build_config().name
    with monkeypatch.context() as patch:
        patch.setattr(torch, "__version__", "9.9.9")
        names["torch"] = fused_kernel.build_config().name
    with monkeypatch.context() as patch:
        patch.setattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", not torch._C._GLIBCXX_USE_CXX11_ABI)
        names["c++ abi"] = fused_kernel.build_config().name
    with monkeypatch.context() as patch:
        patch.setattr(kernel_cache.sysconfig, "get_platform", lambda: "another-platform")
        names["python platform"] = fused_kernel.build_config().name
    assert len(set(names.values()) | {base.name}) == len(names) + 1, names


def test_the_cache_is_posfairs_variable_then_torchs_then_torchs_default(monkeypatch, tmp_path):
    monkeypatch.setenv(kernel_cache.CACHE_ENV, str(tmp_path / "posfair"))
    monkeypatch.setenv(kernel_cache.TORCH_CACHE_ENV, str(tmp_path / "torch"))
    assert kernel_cache.cache_root() == tmp_path / "posfair"
    monkeypatch.delenv(kernel_cache.CACHE_ENV)
    assert kernel_cache.cache_root() == tmp_path / "torch"
    monkeypatch.delenv(kernel_cache.TORCH_CACHE_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert kernel_cache.cache_root() == (tmp_path / "xdg").resolve() / "torch_extensions" / "posfair"


def test_the_lock_timeout_is_read_from_the_environment(monkeypatch):
    monkeypatch.delenv(kernel_cache.LOCK_TIMEOUT_ENV, raising=False)
    assert kernel_cache.lock_timeout() == kernel_cache.DEFAULT_LOCK_TIMEOUT
    monkeypatch.setenv(kernel_cache.LOCK_TIMEOUT_ENV, "2.5")
    assert kernel_cache.lock_timeout() == 2.5
    for bad in ("soon", "-1"):
        monkeypatch.setenv(kernel_cache.LOCK_TIMEOUT_ENV, bad)
        with pytest.raises(ValueError, match=kernel_cache.LOCK_TIMEOUT_ENV):
            kernel_cache.lock_timeout()


@pytest.mark.skipif(os.name == "nt", reason="flock")
def test_a_live_owner_holds_the_lock_until_the_timeout_and_a_dead_one_not_at_all(tmp_path):
    lock = tmp_path / "k.lock"
    owner = kernel_builds.hold_lock(lock)
    try:
        waits = []
        timeout = pytest.raises(KernelLockTimeoutError, match=f"pid {owner.pid} on .* more than 0.3 s")
        with timeout, kernel_cache.build_lock(lock, 0.3, lambda: waits.append(1)):
            pass
        assert waits == [1]  # the wait is announced once
        os.kill(owner.pid, signal.SIGKILL)  # a dead owner: the kernel drops its lock, its file stays
        owner.wait()
        start = time.monotonic()
        with kernel_cache.build_lock(lock, 10):
            assert lock.read_text().startswith(f"pid {os.getpid()} ")
        assert time.monotonic() - start < 1
    finally:
        owner.kill()
        owner.wait()


def test_the_cause_is_the_compilers_line_not_ninjas():
    no_compiler = (
        "Error building extension 'posfair_basket_pieces_avx2_0123': [1/2] c++ -MMD -MF basket_pieces.o.d -c x.cpp\n"
        "FAILED: basket_pieces.o\n"
        "c++ -MMD -MF basket_pieces.o.d -DTORCH_EXTENSION_NAME=x -c /src/basket_pieces.cpp -o basket_pieces.o\n"
        "/bin/sh: 1: c++: not found\n"
        "ninja: build stopped: subcommand failed.\n"
    )
    assert kernel_cache.build_cause(no_compiler) == "/bin/sh: 1: c++: not found"
    compile_error = (
        "[1/2] /usr/bin/g++ -MMD -c basket_pieces.cpp -o basket_pieces.o\n"
        "FAILED: [code=1] basket_pieces.o\n"
        "/usr/bin/g++ -MMD -c basket_pieces.cpp -o basket_pieces.o\n"
        "In file included from basket_pieces.cpp:11:\n"
        "basket_pieces.cpp:40:3: error: 'foo' was not declared in this scope\n"
        "basket_pieces.cpp:41:3: error: 'bar' was not declared in this scope\n"
        "ninja: build stopped: subcommand failed.\n"
    )
    first_error = "basket_pieces.cpp:40:3: error: 'foo' was not declared in this scope"
    assert kernel_cache.build_cause(compile_error) == first_error
    link_error = (
        "[2/2] c++ basket_pieces.o -shared -ltorch_python -o x.so\n"
        "FAILED: x.so\n"
        "/usr/bin/ld: cannot find -ltorch_python: No such file or directory\n"
        "collect2: error: ld returned 1 exit status\n"
        "ninja: build stopped: subcommand failed.\n"
    )
    assert kernel_cache.build_cause(link_error) == "/usr/bin/ld: cannot find -ltorch_python: No such file or directory"
    assert kernel_cache.build_cause("ninja: build stopped: interrupted by user.\nsomething odd\n") == "something odd"
    assert len(kernel_cache.build_cause("error: " + "x" * 1000)) == 400


def _finished(root, spec) -> None:
    folder = root / spec.name
    folder.mkdir(parents=True)
    (folder / "lib.so").write_bytes(b"")
    manifest = {"module": spec.name, "library": "lib.so", "key": spec.key}
    (folder / kernel_cache.MANIFEST).write_text(json.dumps(manifest))


def test_a_runtime_without_a_compiler_uses_a_kernel_another_compiler_built(monkeypatch, tmp_path):
    monkeypatch.setenv("CXX", str(tmp_path / "no-compiler"))
    runtime = fused_kernel.build_config()
    assert runtime.compiler_version is None
    gcc_flags = [*runtime.key["cflags"], *kernel_cache.GCC_AVX2_FLAGS]  # the compiler's spelling may differ
    image_key = {**runtime.key, "compiler": "g++ 12", "cflags": gcc_flags}
    image_build = dataclasses.replace(runtime, compiler_version="g++ 12", key=image_key)
    _finished(tmp_path / "cache", image_build)
    assert kernel_cache.find_built(runtime, tmp_path / "cache") == tmp_path / "cache" / image_build.name
    other = dataclasses.replace(runtime, compiler_version="g++ 13", key={**runtime.key, "compiler": "g++ 13"})
    assert kernel_cache.find_built(other, tmp_path / "cache") is None  # a compiler here builds its own
    stale = dataclasses.replace(image_build, key={**image_build.key, "torch": ["1.0"]})
    _finished(tmp_path / "stale", stale)
    assert kernel_cache.find_built(runtime, tmp_path / "stale") is None  # never another torch's binary


def test_a_folder_without_its_manifest_is_not_a_kernel(tmp_path):
    spec = fused_kernel.build_config()
    (tmp_path / spec.name).mkdir()
    (tmp_path / spec.name / "lib.so").write_bytes(b"")
    assert kernel_cache.find_built(spec, tmp_path) is None
    with pytest.raises(KernelBuildError, match="holds no finished kernel"):
        kernel_cache.load_built(tmp_path / spec.name)


@pytest.mark.skipif(not HAS_COMPILER, reason="the compiler is checked first")
def test_a_cache_that_cannot_be_written_says_what_to_do(tmp_path):
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    with pytest.raises(KernelBuildError, match=f"cannot be created .*{kernel_cache.CACHE_ENV}.*posfair kernel build"):
        kernel_cache.load_or_build(fused_kernel.build_config(), blocked / "cache")
