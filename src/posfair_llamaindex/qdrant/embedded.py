"""Which embedded engine opens a folder: Qdrant Edge by default, qdrant-client's local mode for its own folders.

Edge (``EdgeQdrantClient``) is Qdrant's Rust engine in-process: milliseconds per query where local mode, a Python
re-implementation, takes seconds on a large windows collection (docs/RESULTS.md §9.5). A new or empty folder
becomes an Edge store; a folder local mode wrote keeps opening with local mode, and :func:`local_mode_note` says
how to move it. ``engine="local"`` asks for local mode on purpose.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal, Optional, Union

from posfair_llamaindex.qdrant.edge_store import LOCAL_MODE_FILES, MARKER_FILE

EmbeddedEngine = Literal["edge", "local"]
EMBEDDED_ENGINES: tuple = ("edge", "local")


def folder_engine(path: Union[str, os.PathLike]) -> Optional[EmbeddedEngine]:
    """The engine whose store ``path`` holds: ``"edge"``, ``"local"``, or None for a new or empty folder (or one
    that is neither's: the engine that opens it names the problem)."""
    folder = Path(path)
    if (folder / MARKER_FILE).is_file():
        return "edge"
    if (folder / LOCAL_MODE_FILES[0]).is_file():  # local mode writes its meta.json when it first opens a folder
        return "local"
    return None


def open_embedded(path: Union[str, os.PathLike], *, engine: Optional[EmbeddedEngine] = None, **edge_options):
    """A ``QdrantClient`` on the folder ``path``: the engine that wrote it, else ``engine`` (Edge when None).

    ``edge_options`` go to :class:`~posfair_llamaindex.qdrant.edge_client.EdgeQdrantClient`. Asking for one engine
    on a folder the other wrote is refused: neither reads the other's files.
    """
    if engine is not None and engine not in EMBEDDED_ENGINES:
        raise ValueError(f"engine must be one of {list(EMBEDDED_ENGINES)}, got {engine!r}")
    found = folder_engine(path)
    if engine is not None and found is not None and found != engine:
        raise ValueError(
            f"{path} holds a {_NAMES[found]} store, not a {_NAMES[engine]} one; open it with engine={found!r}, or "
            f"copy it with `posfair migrate --from-path {path} --to-path NEW_FOLDER`"
        )
    if (found or engine or "edge") == "local":
        from qdrant_client import QdrantClient

        return QdrantClient(path=str(path))
    from posfair_llamaindex.qdrant.edge_client import EdgeQdrantClient

    return EdgeQdrantClient(path=str(path), **edge_options)


def local_mode_note(path: Union[str, os.PathLike]) -> str:
    """One line for a folder in local mode's format: why it is slow, and the command that moves it to Edge."""
    return (
        f"note: {path} is a qdrant-client local-mode folder, a Python engine that answers slowly on large "
        f"collections; `posfair migrate --from-path {path} --to-path NEW_FOLDER` copies it to Qdrant Edge"
    )


_NAMES = {"edge": "Qdrant Edge", "local": "qdrant-client local-mode"}


def index_after_bulk_write(client, collection_name: str) -> bool:
    """Build a Qdrant Edge collection's indexes once, after a bulk write; True when it was an Edge client.

    Edge indexes only when asked, so a collection written point by point and never optimized is searched exactly:
    right for a small one, slow for a large one. One ``optimize`` after the points are in builds each HNSW graph
    once (docs/RESULTS.md §9.5); a server does this in the background by itself, and local mode has no index."""
    optimize = getattr(client, "optimize", None)
    if optimize is None:
        return False
    optimize(collection_name)
    return True
