"""``posfair kernel``: build the compiled attention kernel ahead of time (an image, a cluster's shared cache), or
say where it is and what it is built for."""

from __future__ import annotations

import sys

from posfair_llamaindex.cli.arguments import CliError

WHERE = (
    "The cache is POSFAIR_KERNEL_DIR, else TORCH_EXTENSIONS_DIR, else ~/.cache/torch_extensions/posfair; the kernel "
    "is built for the CPU capability torch dispatches to (ATEN_CPU_CAPABILITY=avx2 builds the AVX2 one on an "
    "AVX-512 host)."
)


def register(commands) -> None:
    kernel = commands.add_parser(
        "kernel",
        help="build the compiled attention kernel ahead of time, or show where it is",
        description="Mean pooling uses a small compiled kernel, built once per CPU capability, compiler and torch "
        "on first use. Build it ahead of time for an image or a cluster's shared cache, or check what is there. "
        + WHERE,
    )
    actions = kernel.add_subparsers(dest="action", required=True, metavar="ACTION")
    build = actions.add_parser(
        "build",
        help="build the kernel now (nothing to do when it is built)",
        description="Build the kernel into the cache, or load it where it is already built, and print the folder, "
        "the capability and the time. Exits non-zero with the cause when it cannot be built. " + WHERE,
    )
    build.add_argument("--verbose", action="store_true", help="on failure, print the whole build log")
    build.set_defaults(handler=run_build)
    status = actions.add_parser(
        "status",
        help="where the kernel lives, what it is built for, and whether it is built",
        description="Print the cache folder, the capability, the compiler and flags, and whether a finished kernel "
        "is there. Reads only. " + WHERE,
    )
    status.set_defaults(handler=run_status)


def run_build(args) -> int:
    from posfair_llamaindex.calibration.kernel import fused_kernel
    from posfair_llamaindex.calibration.kernel.kernel_cache import KernelBuildError

    spec = fused_kernel.build_config()
    try:
        built = fused_kernel.build()
    except KernelBuildError as error:
        if args.verbose:
            print(error.log, file=sys.stderr)
        raise CliError(f"the kernel ({spec.capability}) could not be built: {error.cause}") from error
    if built.seconds is None:
        print(f"already built for {spec.capability}: {built.folder}")
    else:
        print(f"built for {spec.capability} in {built.seconds:.1f} s: {built.folder}")
    return 0


def run_status(args) -> int:
    from posfair_llamaindex.calibration.kernel import fused_kernel, kernel_cache

    spec = fused_kernel.build_config()
    root = kernel_cache.cache_root()
    found = kernel_cache.find_built(spec, root)
    rows = [
        ("cache", str(root)),
        ("capability", f"{spec.capability} (torch dispatches to {spec.dispatched})"),
        ("compiler", f"{spec.compiler}: " + (spec.compiler_version or "not found").splitlines()[0]),
        ("flags", " ".join(spec.cflags)),
        ("folder", spec.name),
        ("built", str(found) if found is not None else "no (built on first use, or by `posfair kernel build`)"),
        ("switch", f"{fused_kernel.ENV_SWITCH}={'on' if fused_kernel.enabled() else 'off'}"),
    ]
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name.ljust(width)}  {value}")
    return 0
