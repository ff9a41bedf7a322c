"""What the compiled kernel costs a process: its one-off build, and loading it once it is built (DESIGN.md §2.1).

Each build runs ``posfair kernel build`` in a fresh process into an empty cache, for the capability torch
dispatches to here and, on an AVX-512 host, for AVX2 too (``ATEN_CPU_CAPABILITY=avx2``). Loading is timed in
fresh processes, after ``import torch``: the package's loader (an import of the finished folder, no lock, no
ninja) against ``torch.utils.cpp_extension.load`` on a copy of the same finished folder (what the loader did
before issue 28: it runs ninja to see that nothing is out of date, under torch's lock, then imports).

    flock /work/coord/cpu.lock python benchmarks/bench_kernel_build.py
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LOAD_OURS = """
import time, torch
from posfair_llamaindex.calibration.kernel import fused_kernel
start = time.perf_counter()
assert fused_kernel.module() is not None
print(time.perf_counter() - start)
"""
LOAD_TORCH = """
import json, sys, time, torch
from torch.utils import cpp_extension
folder, manifest = sys.argv[1], json.loads(open(sys.argv[2]).read())
start = time.perf_counter()
cpp_extension.load(name=manifest["module"], sources=[sys.argv[3]], extra_cflags=manifest["key"]["cflags"],
                   extra_ldflags=manifest["key"]["ldflags"], build_directory=folder)
print(time.perf_counter() - start)
"""


def run(code_or_cli: list, env: dict) -> str:
    done = subprocess.run(code_or_cli, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"failed: {' '.join(code_or_cli[:3])}\n{done.stderr[-2000:]}")
    return done.stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--loads", type=int, default=7, help="fresh processes per loader")
    parser.add_argument("--out", default="benchmarks/results/kernel_build.json")
    args = parser.parse_args()
    import torch

    from posfair_llamaindex.calibration.kernel import fused_kernel

    host = torch.backends.cpu.get_cpu_capability()
    capabilities = [host.lower()] + (["avx2"] if host == "AVX512" else [])
    results = {"host_capability": host, "cores": os.cpu_count(), "torch": torch.__version__, "builds": {}}
    scratch = Path(tempfile.mkdtemp(prefix="posfair-kernel-bench-"))
    try:
        for capability in capabilities:
            env = {**os.environ, "POSFAIR_KERNEL_DIR": str(scratch / capability), "ATEN_CPU_CAPABILITY": capability}
            start = time.perf_counter()
            line = run([sys.executable, "-m", "posfair_llamaindex.cli", "kernel", "build"], env)
            wall = time.perf_counter() - start
            build = float(re.search(r"in ([\d.]+) s", line).group(1))
            results["builds"][capability] = {"build_s": build, "process_s": round(wall, 1)}
            print(f"{capability}: build {build:.1f} s, the whole process {wall:.1f} s")
        env = {**os.environ, "POSFAIR_KERNEL_DIR": str(scratch / host.lower())}
        env.pop("ATEN_CPU_CAPABILITY", None)
        ours = [float(run([sys.executable, "-c", LOAD_OURS], env)) for _ in range(args.loads)]
        (folder,) = [p for p in (scratch / host.lower()).iterdir() if p.is_dir()]
        copy = scratch / "torch-load" / folder.name
        shutil.copytree(folder, copy)
        theirs = [
            float(run([sys.executable, "-c", LOAD_TORCH, str(copy), str(copy / "posfair-kernel.json"),
                       str(fused_kernel.SOURCE)], env))
            for _ in range(args.loads)
        ]  # fmt: skip
        results["load_ms"] = {
            "posfair": round(1000 * statistics.median(ours), 1),
            "cpp_extension.load": round(1000 * statistics.median(theirs), 1),
        }
        print(
            f"load of a built kernel, median of {args.loads} processes: {results['load_ms']['posfair']} ms "
            f"(posfair), {results['load_ms']['cpp_extension.load']} ms (cpp_extension.load)"
        )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
