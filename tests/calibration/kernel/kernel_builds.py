"""The compiled kernel in child processes, for the tests of its cache: each child gets the cache folder of its
test through TORCH_EXTENSIONS_DIR (which the package's loader has always honoured), so no test touches ~/.cache,
and each child checks the kernel it got against plain PyTorch attention before it reports."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import torch

HAS_COMPILER = shutil.which(os.environ.get("CXX", "c++").split()[0]) is not None
NO_COMPILER = "needs a C++ compiler"
# how long a child that builds may take before the test calls it hung: a build takes 9-40 s on 2 cores
BUILD_TIMEOUT = 300

# loads (or builds) the kernel, then compares its plain output over two baskets with softmax attention
CHILD = """
import json, sys, torch
from posfair_llamaindex.calibration.kernel import fused_kernel
module = fused_kernel.module()
if module is None:
    sys.exit(3)
torch.manual_seed(0)
q, k, v = torch.randn(1, 2, 8, 16), torch.randn(1, 2, 64, 16), torch.randn(1, 2, 64, 16)
plain = fused_kernel.basket_pieces(q, k, v, None, 0.25, 32)[0].transpose(1, 2)
expected = torch.softmax(q @ k.transpose(-1, -2) * 0.25, dim=-1) @ v
print(json.dumps({"file": module.__file__, "exact": bool(torch.allclose(plain, expected, atol=1e-5))}))
"""


@dataclass
class Child:
    returncode: int
    stdout: str
    stderr: str

    @property
    def report(self) -> dict:
        assert self.returncode == 0, f"exit {self.returncode}\n{self.stderr[-3000:]}"
        return json.loads(self.stdout.strip().splitlines()[-1])


def host_capability() -> str:
    return torch.backends.cpu.get_cpu_capability()


def child_env(root: Path, **extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("POSFAIR_KERNEL_DIR", "POSFAIR_FUSED_KERNEL")}
    env.update(TORCH_EXTENSIONS_DIR=str(root), **extra)
    return env


def start(root: Path, prefix: tuple = (), **extra: str) -> subprocess.Popen:
    """A child that loads the kernel from ``root`` (building it there if it must), in its own process group."""
    return subprocess.Popen(
        [*prefix, sys.executable, "-c", CHILD],
        env=child_env(root, **extra),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def finish(process: subprocess.Popen, timeout: float = BUILD_TIMEOUT) -> Child:
    """Wait for a child; one that outlasts ``timeout`` is killed and fails the test as hung."""
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, 9)
        out, err = process.communicate()
        raise AssertionError(f"the child hung for more than {timeout} s\n{err[-3000:]}") from None
    return Child(process.returncode, out, err)


def hold_lock(path: Path) -> subprocess.Popen:
    """A live child that holds the build lock at ``path`` (taken as a builder takes it) until it is killed."""
    hold = (
        "import pathlib, sys, time\n"
        "from posfair_llamaindex.calibration.kernel.kernel_cache import build_lock\n"
        "with build_lock(pathlib.Path(sys.argv[1]), 5):\n"
        "    print('held', flush=True)\n"
        "    time.sleep(120)\n"
    )
    holder = subprocess.Popen([sys.executable, "-c", hold, str(path)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    return holder


def kill_all(processes) -> None:
    """Children still running (a test failed under them) are killed with their process groups."""
    for process in processes:
        if process.poll() is None:
            os.killpg(process.pid, 9)
            process.communicate()


def finished_folders(root: Path) -> list:
    """Folders under ``root`` that hold a built library, private build folders left out."""
    libraries = [*root.glob("*/*.so"), *root.glob("*/*.pyd")]
    return sorted({p.parent for p in libraries if ".tmp-" not in p.parent.name})


def private_folders(root: Path) -> list:
    return sorted(p for p in root.iterdir() if p.is_dir() and ".tmp-" in p.name)
