"""A compiled torch extension in a cache that many processes, hosts and read-only images can share.

What torch's own JIT loader leaves to chance is settled here (DESIGN.md §2.1):

- the folder's name carries a hash of everything the binary depends on (source, flags, torch, compiler, C++ and
  Python ABI), so another CPU capability or compiler never reuses a binary built for something else;
- the instruction set follows the capability torch dispatches to (``ATEN_CPU_CAPABILITY`` included), with the
  flags ATen compiles its own kernels of that capability with; never ``-march=native``;
- a build runs in a private folder beside the final one and is renamed into place, so a half-built folder is
  never seen under the final name;
- builders take an OS lock the kernel drops when its holder dies (``kill -9`` included), and waiters give up
  after a timeout instead of spinning on a stale lock file as torch's ``FileBaton`` does;
- a finished folder is imported directly, without a lock and without writing, so it may sit in a read-only image.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import platform
import re
import shlex
import shutil
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import torch

from posfair_llamaindex.errors import KernelBuildError, KernelLockTimeoutError
from posfair_llamaindex.tag import fingerprint_of

logger = logging.getLogger(__name__)


CACHE_ENV = "POSFAIR_KERNEL_DIR"  # wins over torch's TORCH_EXTENSIONS_DIR
TORCH_CACHE_ENV = "TORCH_EXTENSIONS_DIR"
LOCK_TIMEOUT_ENV = "POSFAIR_KERNEL_LOCK_TIMEOUT"
DEFAULT_LOCK_TIMEOUT = 300.0  # seconds a process waits for another one's build before it runs without the kernel
MANIFEST = "posfair-kernel.json"  # written last inside the private folder: a folder with it is finished
TEMP_MARK = ".tmp-"
COMPILER_KEYS = ("compiler", "cflags", "ldflags")  # what a runtime without a compiler cannot check

# The instruction-set flags ATen builds its own kernels of each capability with (cmake/Codegen.cmake, GCC and
# Clang spelling). Any other capability (DEFAULT, NO AVX, VSX, ZVECTOR, SVE) gets the portable DEFAULT build.
ISA_FLAGS = {
    "AVX512": ("-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512dq", "-mfma"),
    "AVX2": ("-mavx2", "-mfma"),
}
# what ATen adds to AVX2 on GCC: some GCC versions split unaligned 256-bit loads and stores otherwise
GCC_AVX2_FLAGS = ("-mno-avx256-split-unaligned-load", "-mno-avx256-split-unaligned-store")
MSVC_ISA_FLAGS = {"AVX512": ("/arch:AVX512",), "AVX2": ("/arch:AVX2",)}
# a line of build output that states the cause (the compiler's or the linker's), not ninja's summary
_CAUSE = re.compile(
    r"\berror\b|not found|no such file|cannot find|undefined reference|permission denied|killed|out of memory", re.I
)


@dataclass(frozen=True)
class KernelBuildConfig:
    """What is compiled and how: the inputs of the cache key, and the folder (and module) name it gives."""

    base: str
    source: Path
    capability: str  # the capability compiled for: AVX512, AVX2 or DEFAULT
    dispatched: str  # what torch dispatches to in this process (get_cpu_capability)
    compiler: str  # the command, as torch runs it (CXX, else c++ / cl)
    compiler_version: Optional[str]  # None where the compiler cannot be run
    cflags: tuple
    ldflags: tuple
    key: dict

    @property
    def name(self) -> str:
        """Folder and module name: readable base and capability, then the key's hash."""
        return f"{self.base}_{self.capability.lower()}_{fingerprint_of(self.key)}"

    def runtime_key(self) -> dict:
        """What a finished binary needs to run here: the key without the compiler and its spelling of the flags."""
        return {k: v for k, v in self.key.items() if k not in COMPILER_KEYS}


@dataclass(frozen=True)
class Built:
    """A loaded kernel, the folder it was loaded from, and the build's seconds (None: it was already built)."""

    module: object
    folder: Path
    seconds: Optional[float]


def build_target(capability: str) -> str:
    """The capability to compile for, from the name torch reports: AVX512 and AVX2 as they are, else DEFAULT."""
    name = capability.strip().upper()
    return name if name in ISA_FLAGS else "DEFAULT"


def compiler_command() -> str:
    """The C++ compiler torch's build runs: ``CXX``, else ``c++`` (``cl`` on Windows)."""
    return os.environ.get("CXX") or ("cl" if os.name == "nt" else "c++")


def compiler_version(command: str) -> Optional[str]:
    """What the compiler says it is (``--version``; ``cl``'s banner), or None where it cannot be run."""
    argv = shlex.split(command, posix=os.name != "nt")
    if not argv or shutil.which(argv[0]) is None:
        return None
    is_cl = Path(argv[0]).stem.lower() == "cl"
    try:
        done = subprocess.run(
            argv if is_cl else [*argv, "--version"], capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    text = done.stderr if is_cl else (done.stdout or done.stderr)
    # the install folder differs between hosts with the same compiler; the version and target do not
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("InstalledDir")]
    return "\n".join(lines) or None


def _compiler_kind(command: str, version: Optional[str]) -> str:
    argv = shlex.split(command, posix=os.name != "nt")
    if argv and Path(argv[0]).stem.lower() == "cl":
        return "msvc"
    text = (version or "").lower()
    if "clang" in text:
        return "clang"
    return "gcc" if "free software foundation" in text or "gcc" in text or "g++" in text else "other"


def compile_flags(capability: str, kind: str) -> tuple:
    """``(cflags, ldflags)`` for a build target and a compiler kind (gcc, clang, msvc, other)."""
    if kind == "msvc":
        defines = (f"/DCPU_CAPABILITY={capability}", f"/DCPU_CAPABILITY_{capability}")
        return ("/O2", "/openmp", *MSVC_ISA_FLAGS.get(capability, ()), *defines), ()
    isa = ISA_FLAGS.get(capability, ())
    if capability == "AVX2" and kind == "gcc":
        isa = (*isa, *GCC_AVX2_FLAGS)
    defines = (f"-DCPU_CAPABILITY={capability}", f"-DCPU_CAPABILITY_{capability}")
    return ("-O3", "-fopenmp", *isa, *defines), ("-fopenmp",)


def spec_for(base: str, source: Path, capability: Optional[str] = None) -> KernelBuildConfig:
    """The spec of ``source`` for ``capability`` (default: the one torch dispatches to in this process)."""
    dispatched = torch.backends.cpu.get_cpu_capability()
    target = build_target(capability or dispatched)
    command = compiler_command()
    version = compiler_version(command)
    cflags, ldflags = compile_flags(target, _compiler_kind(command, version))
    key = {
        "capability": target,
        "source": fingerprint_of({"text": Path(source).read_text(encoding="utf-8")}),
        "cflags": list(cflags),
        "ldflags": list(ldflags),
        "torch": [torch.__version__, getattr(torch.version, "git_version", ""), torch.version.cuda],
        "compiler": version,
        "cxx11_abi": bool(torch._C._GLIBCXX_USE_CXX11_ABI),
        "python": [
            sys.implementation.cache_tag,
            sysconfig.get_config_var("EXT_SUFFIX"),
            sysconfig.get_platform(),
            platform.machine(),
        ],
    }
    return KernelBuildConfig(base, Path(source), target, dispatched, command, version, cflags, ldflags, key)


def cache_root() -> Path:
    """Where finished kernels live: ``POSFAIR_KERNEL_DIR``, else ``TORCH_EXTENSIONS_DIR``, else a ``posfair``
    folder under torch's own default (``~/.cache/torch_extensions``, honouring ``XDG_CACHE_HOME``)."""
    for variable in (CACHE_ENV, TORCH_CACHE_ENV):
        value = os.environ.get(variable, "").strip()
        if value:
            return Path(value).expanduser()
    from torch.utils.cpp_extension import get_default_build_root

    return Path(get_default_build_root()) / "posfair"


def lock_timeout() -> float:
    """Seconds to wait for another process's build (``POSFAIR_KERNEL_LOCK_TIMEOUT``)."""
    text = os.environ.get(LOCK_TIMEOUT_ENV, "").strip()
    if not text:
        return DEFAULT_LOCK_TIMEOUT
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if value < 0:
        raise ValueError(f"{LOCK_TIMEOUT_ENV}={text!r}: give a number of seconds, 0 or more")
    return value


def _manifest(folder: Path) -> Optional[dict]:
    try:
        manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(manifest, dict) or not (folder / str(manifest.get("library", ""))).is_file():
        return None
    return manifest


def find_built(spec: KernelBuildConfig, root: Path) -> Optional[Path]:
    """The finished folder for ``spec`` under ``root``, or None. Reads only. Where the compiler cannot be run (a
    runtime image without one), a finished folder whose key differs only in the compiler is as good."""
    exact = root / spec.name
    if _manifest(exact) is not None:
        return exact
    if spec.compiler_version is not None:
        return None
    wanted = spec.runtime_key()
    for folder in sorted(root.glob(f"{spec.base}_{spec.capability.lower()}_*")):
        manifest = _manifest(folder) if TEMP_MARK not in folder.name else None
        key = {k: v for k, v in manifest.get("key", {}).items() if k not in COMPILER_KEYS} if manifest else {}
        if manifest and key == wanted:
            return folder
    return None


def load_built(folder: Path):
    """Import a finished kernel straight from its folder: no lock, nothing written."""
    manifest = _manifest(folder)
    if manifest is None:
        raise KernelBuildError(f"{folder} holds no finished kernel ({MANIFEST} or its library is missing)")
    path = folder / manifest["library"]
    spec = importlib.util.spec_from_file_location(manifest["module"], path)
    if spec is None or spec.loader is None:
        raise KernelBuildError(f"{path} cannot be imported as an extension module")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except ImportError as error:
        raise KernelBuildError(f"{path} does not import: {error}") from error
    return module


def load_or_build(spec: KernelBuildConfig, root: Optional[Path] = None, timeout: Optional[float] = None) -> Built:
    """Load the finished kernel for ``spec``, or build it once under the cache's lock and load it."""
    root = cache_root() if root is None else Path(root)
    found = find_built(spec, root)
    if found is not None:
        return Built(load_built(found), found, None)
    _check_tools(spec)  # before anything is written
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise _unwritable(f"the kernel cache {root} cannot be created", error) from error
    path = lock_path(spec, root)
    with build_lock(path, lock_timeout() if timeout is None else timeout, lambda: _waiting(path)):
        found = find_built(spec, root)  # built by the process we waited for
        if found is not None:
            return Built(load_built(found), found, None)
        return _build_locked(spec, root)


def _unwritable(what: str, error: OSError) -> KernelBuildError:
    return KernelBuildError(
        f"{what} ({_describe(error)}); point {CACHE_ENV} at a writable folder, or build the kernel there ahead of "
        "time with `posfair kernel build`"
    )


def _describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


def announce(message: str) -> None:
    """One WARNING line that the user sees (the CLI prints warnings), drawn above any tqdm bars, not through
    them."""
    from tqdm import tqdm

    with tqdm.external_write_mode(file=sys.stderr):
        logger.warning(message)


def _waiting(path: Path) -> None:
    announce(f"another process is building the posfair compiled attention kernel (lock {path}); waiting for it")


def lock_path(spec: KernelBuildConfig, root: Path) -> Path:
    """The lock builders of ``spec`` take, beside its folder (the folder does not exist before the build)."""
    return root / f"{spec.name}.lock"


@contextmanager
def build_lock(path: Path, timeout: float, on_wait: Callable[[], None] = lambda: None):
    """An exclusive lock on ``path`` that the OS drops when its holder dies: ``flock(2)`` on POSIX (on NFS, Linux
    maps it to a POSIX lock), ``msvcrt.locking`` on Windows. The file is never deleted: unlinking a lock file
    lets a second holder in on a new inode while the first still holds the old one."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    except PermissionError as error:
        if not path.exists():
            raise _unwritable(f"the build lock {path} cannot be created", error) from error
        try:
            fd = os.open(path, os.O_RDONLY)  # another user's lock file: locking needs no write access
        except OSError as again:
            raise _unwritable(f"the build lock {path} cannot be opened", again) from again
    except OSError as error:
        raise _unwritable(f"the build lock {path} cannot be created", error) from error
    try:
        deadline, waited = time.monotonic() + timeout, False
        while not _try_lock(fd):
            if not waited:
                on_wait()
                waited = True
            if time.monotonic() >= deadline:
                raise KernelLockTimeoutError(
                    f"another process ({_owner(fd)}) has held the build lock {path} for more than {timeout:g} s; "
                    f"this process runs without the kernel ({LOCK_TIMEOUT_ENV} sets the wait)"
                )
            time.sleep(0.2)
        _write_owner(fd)
        try:
            yield
        finally:
            _unlock(fd)
    finally:
        os.close(fd)


if os.name == "nt":  # pragma: no cover - exercised on Windows only
    import msvcrt

    def _try_lock(fd: int) -> bool:
        os.lseek(fd, 0, os.SEEK_SET)
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True

    def _unlock(fd: int) -> None:
        os.lseek(fd, 0, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)

    def _write_owner(fd: int) -> None:  # the locked byte cannot be read by waiters on Windows
        return None

    def _owner(fd: int) -> str:
        return "its id is not recorded on Windows"

else:
    import fcntl

    def _try_lock(fd: int) -> bool:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

    def _unlock(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_UN)

    def _write_owner(fd: int) -> None:
        """Who holds the lock, for a waiter's timeout message; best effort (the file may be read-only to us)."""
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()}\n".encode(), 0)
        except OSError:
            pass

    def _owner(fd: int) -> str:
        try:
            return os.pread(fd, 200, 0).decode(errors="replace").strip() or "unknown"
        except OSError:
            return "unknown"


def _build_locked(spec: KernelBuildConfig, root: Path) -> Built:
    """Build into a private folder beside the final one, then rename it into place. Called under the lock."""
    for stale in root.glob(f"{spec.name}{TEMP_MARK}*"):  # left by a builder that died; none is alive now
        shutil.rmtree(stale, ignore_errors=True)
    final = root / spec.name
    try:
        if final.exists():  # a folder without a finished kernel: never made by this module, moved aside
            aside = Path(tempfile.mkdtemp(prefix=f"{spec.name}{TEMP_MARK}", dir=root))
            os.rename(final, aside / "unfinished")
        private = Path(tempfile.mkdtemp(prefix=f"{spec.name}{TEMP_MARK}", dir=root))
    except OSError as error:
        raise _unwritable(f"the kernel cache {root} is not writable", error) from error
    announce(
        f"building the posfair compiled attention kernel once for this CPU ({spec.capability}; typically 10-40 s) "
        f"in {final}"
    )
    start = time.perf_counter()
    try:
        module = _compile(spec, private)
        seconds = time.perf_counter() - start
        library = Path(module.__file__).name
        manifest = {
            "module": module.__name__,
            "library": library,
            "capability": spec.capability,
            "key": spec.key,
            "seconds": round(seconds, 1),
            "built": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "host": socket.gethostname(),
        }
        (private / MANIFEST).write_text(json.dumps(manifest, indent=1), encoding="utf-8")
        private.chmod(0o755)  # mkdtemp's 0700 would hide a shared cache's kernel from other users
        _place(private, final)
    except BaseException:
        shutil.rmtree(private, ignore_errors=True)
        raise
    module.__file__ = str(final / library)
    announce(f"the posfair compiled attention kernel was built in {seconds:.1f} s; later runs load it from {final}")
    return Built(module, final, seconds)


def _place(private: Path, final: Path) -> None:
    """Rename the finished folder into place (atomic on one file system). Windows refuses to rename a folder
    whose library this process has loaded, so there a copy is renamed and the loaded one is left to be removed
    as stale by the next build."""
    try:
        os.rename(private, final)
    except OSError:
        if os.name != "nt":
            raise
        copy = Path(tempfile.mkdtemp(prefix=f"{final.name}{TEMP_MARK}", dir=final.parent)) / "kernel"
        shutil.copytree(private, copy)
        os.rename(copy, final)


def _check_tools(spec: KernelBuildConfig) -> None:
    """Fail with the real cause before ninja would bury it under 'build stopped: subcommand failed'."""
    argv = shlex.split(spec.compiler, posix=os.name != "nt")
    if not argv or shutil.which(argv[0]) is None:
        raise KernelBuildError(f"{argv[0] if argv else 'CXX'}: not found (no C++ compiler; install one or set CXX)")
    if shutil.which("ninja") is None:
        raise KernelBuildError("ninja: not found on PATH (pip install ninja, or activate the environment it is in)")


def _compile(spec: KernelBuildConfig, folder: Path):
    """torch's own build (its ninja file, include paths and ABI flags) into ``folder``, which only this process
    uses, so torch's lock there can never be contended or left behind where anyone looks."""
    from torch.utils import cpp_extension

    records: list = []
    with _torch_build_logs(records):
        try:
            return cpp_extension.load(
                name=spec.name,
                sources=[str(spec.source)],
                extra_cflags=list(spec.cflags),
                extra_ldflags=list(spec.ldflags),
                build_directory=str(folder),
                verbose=False,
            )
        except Exception as error:
            log = "\n".join([*records, str(error)])
            raise KernelBuildError(build_cause(log) or _describe(error), log) from error


class _Collect(logging.Handler):
    def __init__(self, records: list) -> None:
        super().__init__(logging.DEBUG)
        self.records = records

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record.getMessage())


@contextmanager
def _torch_build_logs(records: list):
    """torch's build messages (compiler checks, with tracebacks) go into the log, not onto the user's terminal."""
    torch_logger = logging.getLogger("torch.utils.cpp_extension")
    handler, propagate = _Collect(records), torch_logger.propagate
    torch_logger.addHandler(handler)
    torch_logger.propagate = False
    try:
        yield
    finally:
        torch_logger.removeHandler(handler)
        torch_logger.propagate = propagate


def build_cause(log: str, limit: int = 400) -> str:
    """The line of a build's output that says what went wrong: the compiler's or linker's first error, not the
    command lines ninja echoes nor its closing 'build stopped: subcommand failed'."""
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    compilers = {Path(compiler_command().split()[0]).name, "c++", "g++", "gcc", "clang++", "clang", "cl", "ccache"}

    def is_noise(line: str) -> bool:
        first = line.split()[0]
        return line.startswith(("ninja:", "FAILED:", "[", "Error building extension")) or Path(first).name in compilers

    useful = [line for line in lines if not is_noise(line)]
    cause = next((line for line in useful if _CAUSE.search(line)), useful[-1] if useful else "")
    return cause if len(cause) <= limit else cause[: limit - 3] + "..."
