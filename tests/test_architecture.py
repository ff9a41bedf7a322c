"""The shape of the package: the folders are its layers, imports flow one way (down), the command line sits on
top of the library, and docs/DESIGN.md shows the real tree."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import posfair_llamaindex

PACKAGE = "posfair_llamaindex"
ROOT = Path(posfair_llamaindex.__file__).resolve().parent


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict:
    """``{module: {package modules it imports}}``, counting imports inside functions too."""
    modules = {module_name(p): p for p in ROOT.rglob("*.py")}
    graph = {}
    for name, path in modules.items():
        edges = set()
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:  # relative import
                    base = name.split(".") if is_package else name.split(".")[:-1]
                    base = base[: len(base) - node.level + 1]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                # "from package import submodule" imports the submodule
                targets = [
                    f"{source}.{alias.name}" if f"{source}.{alias.name}" in modules else source for alias in node.names
                ]
            else:
                continue
            edges |= {t for t in targets if t in modules and t != name}
        graph[name] = edges
    return graph


def cycles(graph: dict) -> list:
    """Every import cycle, as a list of modules; the package's own ``__init__`` re-exports are not cycles."""
    found, state, stack = [], {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph[node]):
            if nxt == PACKAGE:  # every submodule import runs the package __init__ first; that is not a cycle
                continue
            if state.get(nxt) == "open":
                found.append(stack[stack.index(nxt) :] + [nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node)
    return found


BASE = "base"  # the small modules at the root that every layer may use
# each folder (or root module) and the layer it belongs to, most specific first
LAYER_OF = (
    ("jobs.distributed", "distributed"),
    ("calibration", "calibration"),
    ("model", "model"),
    ("encoding", "encoding"),
    ("embedding_pickling", "embedding"),
    ("embedding", "embedding"),
    ("qdrant", "qdrant"),
    ("jobs", "jobs"),
    ("eval", "eval"),
    ("train", "train"),
    ("cli", "cli"),
    ("options", BASE),
    ("tag", BASE),
    ("errors", BASE),
    ("modes", BASE),
    ("lazy", BASE),
    ("version", BASE),
)
_STACK = [BASE, "calibration", "model", "encoding", "embedding", "qdrant", "jobs", "distributed"]
# what each layer may import: everything below it in the stack; evaluation and training sit beside the store
ALLOWED = {layer: set(_STACK[: i + 1]) for i, layer in enumerate(_STACK)}
ALLOWED["eval"] = set(_STACK[:5]) | {"eval"}
ALLOWED["train"] = ALLOWED["eval"] | {"train"}
ALLOWED["cli"] = set(_STACK) | {"eval", "train", "cli"}


def layer(module: str) -> str:
    relative = module[len(PACKAGE) + 1 :]
    for prefix, name in LAYER_OF:
        if relative == prefix or relative.startswith(prefix + "."):
            return name
    raise AssertionError(f"{module} is in no layer: add its folder to LAYER_OF")


@pytest.fixture(scope="module")
def fresh_import() -> dict:
    """What importing the package's modules does to a fresh interpreter (one child, for the tests that ask): the
    environment variables it changed, whether pyplot came in, and matplotlib's raw backend entry before and after
    (matplotlib.get_backend() would itself import pyplot and resolve a backend), as reprs: unresolved, the entry
    is a sentinel object."""
    code = (
        # what torch, transformers, LlamaIndex and qdrant-client set on import themselves (torch's inductor cache
        # folder, say) is theirs: the package is compared with them loaded
        "import torch, transformers, transformers.modeling_utils, llama_index.core, qdrant_client; "
        "import json, os, sys; before = dict(os.environ); "
        "import matplotlib; raw = lambda: dict.__getitem__(matplotlib.rcParams, 'backend'); backend = raw(); "
        "import posfair_llamaindex, posfair_llamaindex.embedding, posfair_llamaindex.qdrant.store; "
        "import posfair_llamaindex.eval.plots, posfair_llamaindex.eval.report, posfair_llamaindex.cli; "
        "changed = sorted(k for k in set(before) | set(os.environ) if before.get(k) != os.environ.get(k)); "
        "print(json.dumps({'environment_changed': changed, 'pyplot': 'matplotlib.pyplot' in sys.modules, "
        "'backend_before': repr(backend), 'backend_after': repr(raw())}))"
    )
    env = {k: v for k, v in os.environ.items() if k != "TIKTOKEN_CACHE_DIR"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.splitlines()[-1])


def test_the_walk_sees_the_package():
    graph = import_graph()
    assert {f"{PACKAGE}.cli", f"{PACKAGE}.qdrant.store", f"{PACKAGE}.eval.runner"} <= set(graph)
    assert f"{PACKAGE}.embedding" in graph[f"{PACKAGE}.qdrant.collection"]


def test_cycle_detection_works_on_a_known_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles():
    assert cycles(import_graph()) == []


def test_every_folder_imports_only_the_layers_below_it():
    graph = import_graph()
    offenders = {}
    for module, edges in graph.items():
        if module == PACKAGE:  # the package's lazy exports name every layer
            continue
        above = sorted(t for t in edges if t != PACKAGE and layer(t) not in ALLOWED[layer(module)])
        if above:
            offenders[module] = above
    assert offenders == {}


def test_the_layer_rule_catches_an_upward_import():
    assert layer(f"{PACKAGE}.qdrant.store") not in ALLOWED[layer(f"{PACKAGE}.model.loading")]
    assert layer(f"{PACKAGE}.model.loading") in ALLOWED[layer(f"{PACKAGE}.qdrant.store")]


def test_the_library_never_imports_the_command_line():
    graph = import_graph()
    offenders = {
        m: sorted(e)
        for m, e in graph.items()
        if not m.startswith(f"{PACKAGE}.cli") and any(t.startswith(f"{PACKAGE}.cli") for t in e)
    }
    assert offenders == {}


def test_the_distributed_package_sits_on_top_and_ray_stays_inside_it():
    """Only the command line imports ``jobs/distributed/``; only it imports Ray (an optional extra)."""
    graph = import_graph()
    distributed, cli = f"{PACKAGE}.jobs.distributed", f"{PACKAGE}.cli"
    assert f"{PACKAGE}.jobs.ingest" in graph[f"{distributed}.actors"]  # the walk sees the package's edges
    offenders = {
        m: sorted(t for t in e if t.startswith(distributed))
        for m, e in graph.items()
        if not m.startswith((distributed, cli)) and any(t.startswith(distributed) for t in e)
    }
    assert offenders == {}
    importing_ray = []
    for path in ROOT.rglob("*.py"):
        if module_name(path).startswith(distributed):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            if any(name == "ray" or name.startswith("ray.") for name in names):
                importing_ray.append(module_name(path))
    assert importing_ray == []


def test_low_level_modules_do_not_reach_up():
    """The math and the config know nothing about models, LlamaIndex, Qdrant or evaluation."""
    graph = import_graph()
    low = {f"{PACKAGE}.{m}" for m in ("options", "tag", "errors", "calibration.config")}
    for start in (*low, f"{PACKAGE}.calibration.row_math"):
        assert reachable_from(graph, start) <= low, start


# the Edge engine's modules, each importing only those before it: translation, then the folder, then the calls
EDGE_MODULES = (
    "edge_binding",  # the engine's Python binding, imported once
    "edge_errors",  # Edge's exceptions as ours
    "edge_points",  # ids, vectors, payloads
    "edge_config",  # collection settings
    "edge_filters",
    "edge_queries",
    "edge_store",  # the folder, its lock and its shards
    "edge_backend",  # the QdrantBase calls
    "edge_async",  # their async twin
    "edge_client",  # the clients users import
)


def test_the_edge_modules_import_in_one_direction():
    """Translation knows nothing of the folder, the folder nothing of the calls, the calls nothing of the clients."""
    graph = import_graph()
    qdrant = f"{PACKAGE}.qdrant"
    found = sorted(m.rsplit(".", 1)[1] for m in graph if m.startswith(f"{qdrant}.edge_"))
    assert found == sorted(EDGE_MODULES), "place every qdrant/edge_*.py module in EDGE_MODULES"
    offenders = {}
    for i, name in enumerate(EDGE_MODULES):
        allowed = {f"{qdrant}.{below}" for below in EDGE_MODULES[:i]}
        later = sorted(t for t in graph[f"{qdrant}.{name}"] if t.startswith(f"{qdrant}.edge_") and t not in allowed)
        if later:
            offenders[name] = later
    assert offenders == {}
    assert f"{qdrant}.edge_store" in graph[f"{qdrant}.edge_backend"]  # the walk sees the edges


def test_no_two_modules_share_a_name():
    """A stack trace's file name says which module it is, and so which layer."""
    seen: dict[str, list[str]] = {}
    for path in ROOT.rglob("*.py"):
        if path.name not in ("__init__.py", "__main__.py"):
            seen.setdefault(path.name, []).append(module_name(path))
    assert {name: paths for name, paths in seen.items() if len(paths) > 1} == {}


def test_no_module_imports_another_modules_private_name():
    """What one module uses of another is public: the seams between modules have names without underscores."""
    offenders = []
    for path in ROOT.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(PACKAGE):
                private = [a.name for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
                if private:
                    offenders.append((module_name(path), node.module, private))
    assert offenders == []


def design_tree() -> set[str]:
    """The paths drawn in docs/DESIGN.md's package tree (between its tree markers)."""
    text = (ROOT.parents[1] / "docs" / "DESIGN.md").read_text()
    block = text.split("<!-- package tree -->", 1)[1].split("<!-- /package tree -->", 1)[0]
    paths, stack = set(), []
    for line in block.splitlines():
        entry = line.split("#", 1)[0].rstrip()
        if not entry.strip() or entry.strip().startswith("```"):
            continue
        depth = (len(entry) - len(entry.lstrip(" "))) // 4
        name = entry.strip()
        stack[depth:] = [name.rstrip("/")]
        if depth == 0:  # the package folder itself
            continue
        paths.add("/".join(stack[1:]) + ("/" if name.endswith("/") else ""))
    return paths


def real_tree() -> set[str]:
    paths = set()
    for path in ROOT.rglob("*"):
        relative = path.relative_to(ROOT).as_posix()
        if "__pycache__" in relative or path.name in ("__init__.py", "__main__.py"):
            continue
        if path.is_dir():
            paths.add(relative + "/")
        elif path.suffix in (".py", ".cpp"):
            paths.add(relative)
    return paths


def test_the_tree_in_the_design_is_the_real_tree():
    drawn, real = design_tree(), real_tree()
    assert {"calibration/", "calibration/kernel/fused_kernel.py", "qdrant/store.py"} <= real
    assert sorted(real - drawn) == [], "in the package but not drawn in docs/DESIGN.md"
    assert sorted(drawn - real) == [], "drawn in docs/DESIGN.md but not in the package"


def test_the_package_root_holds_at_most_eight_modules():
    """The root is the base layer only; anything else belongs in a layer's folder."""
    root = sorted(p.stem for p in ROOT.glob("*.py") if p.stem != "__init__")
    assert len(root) <= 8, root


def test_importing_the_package_does_not_touch_the_matplotlib_backend(fresh_import):
    assert not fresh_import["pyplot"], "pyplot imported"
    assert fresh_import["backend_after"] == fresh_import["backend_before"]


def test_public_api_is_what_all_lists():
    for name in posfair_llamaindex.__all__:
        assert hasattr(posfair_llamaindex, name), name
    assert "tagged_vector_store" in posfair_llamaindex.__all__
    from posfair_llamaindex.calibration.row_math import RowLayout, calibrate_rows  # noqa: F401
    from posfair_llamaindex.model.attention import CalibrationPlan, posfair_attention  # noqa: F401


def test_every_error_has_one_base_and_keeps_its_builtin_parent():
    from posfair_llamaindex import errors

    parents = {
        "AuditCorpusError": ValueError,
        "CollectionTagMismatchError": ValueError,
        "CopyRefusedError": ValueError,
        "IngestError": RuntimeError,
        "KernelBuildError": RuntimeError,
        "KernelLockTimeoutError": RuntimeError,
        "MismatchedWeightsError": ValueError,
        "QdrantUnavailableError": ConnectionError,
        "QueryEncodingError": RuntimeError,
        "UnsupportedModelError": ValueError,
        "UpgradeIncompleteError": RuntimeError,
        "UpgradeRefusedError": ValueError,
        "EdgeClosedError": RuntimeError,
        "EdgeCollectionNotFoundError": ValueError,
        "EdgeEngineError": RuntimeError,
        "EdgeRequestError": ValueError,
        "EdgeStoreLockedError": RuntimeError,
        "EdgeStoreReadOnlyError": PermissionError,
        "EdgeStoreVersionError": ValueError,
        "EdgeUnsupportedError": NotImplementedError,
        "NotAnEdgeStoreError": ValueError,
        "WrappedEmbeddingError": ValueError,
        "WrappedRequestError": RuntimeError,
    }
    for name in errors.__all__:
        cls = getattr(posfair_llamaindex, name)
        assert issubclass(cls, errors.PosFairError) and name.endswith("Error"), name
        if name in parents:
            assert issubclass(cls, parents[name]), name
    assert set(parents) | {"PosFairError", "CliError"} == set(errors.__all__)
    classes = []
    for path in ROOT.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef) and any(
                getattr(base, "id", "").endswith(("Error", "Exception")) for base in node.bases
            ):
                classes.append((module_name(path), node.name))
    assert {module for module, _ in classes} == {f"{PACKAGE}.errors"}, classes


def reachable_from(graph: dict, module: str) -> set:
    found, todo = set(), [module]
    while todo:
        for nxt in graph[todo.pop()] - found - {PACKAGE}:
            found.add(nxt)
            todo.append(nxt)
    return found


def test_the_two_doors_into_attention_sit_side_by_side():
    """The registered function and the interception share the row math; neither knows the other, loading,
    layer discovery or the encoder. Loading picks a door; the encoder only sees what loading chose."""
    graph = import_graph()
    model = f"{PACKAGE}.model"
    attention, interception = f"{model}.attention", f"{model}.interception"
    loading, layers, encoder = f"{model}.loading", f"{model}.layers", f"{PACKAGE}.encoding.encoder"
    above = {loading, layers, encoder, f"{PACKAGE}.embedding", interception}
    assert reachable_from(graph, attention).isdisjoint(above)
    assert reachable_from(graph, interception).isdisjoint(above - {interception})
    row_math = f"{PACKAGE}.calibration.row_math"
    assert row_math in graph[attention] and row_math in graph[interception]
    assert {interception, layers, attention} <= graph[loading]
    assert loading in graph[encoder]
    assert interception not in graph[encoder]


def test_no_model_module_path_is_named():
    """Layer stacks and attention calls are found by structure; no family's module path is written down."""
    offenders = []
    for path in ROOT.rglob("*.py"):
        text = path.read_text()
        for needle in ("transformers.models.", ".encoder.layer", ".layers[", "self_attn", ".attention.self"):
            if needle in text:
                offenders.append((module_name(path), needle))
    assert offenders == []


def test_importing_the_package_leaves_the_environment_alone(fresh_import):
    assert fresh_import["environment_changed"] == []
