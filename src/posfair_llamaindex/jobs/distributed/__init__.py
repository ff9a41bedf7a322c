"""Scale-out ingestion on Ray Data (``pip install 'posfair-llamaindex[ray]'``).

``ray_ingest`` does what ``posfair ingest`` does, with files read and split by a pool of CPU actors,
documents embedded by a pool of model actors (GPUs when the cluster has them) and the points written to a
Qdrant server from parallel write tasks (or by the driver, for an embedded folder). Names load on first
use; without Ray installed, using one raises an ImportError that names the extra to install.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from posfair_llamaindex.lazy import lazy_exports

_WHERE = {
    "RAY_INSTALL_HINT": "posfair_llamaindex.jobs.distributed.requirements",
    "ray_available": "posfair_llamaindex.jobs.distributed.requirements",
    "require_ray": "posfair_llamaindex.jobs.distributed.requirements",
    "QdrantTarget": "posfair_llamaindex.jobs.distributed.ray_config",
    "RayIngestConfig": "posfair_llamaindex.jobs.distributed.ray_config",
    "EmbedDocuments": "posfair_llamaindex.jobs.distributed.actors",
    "prepare_documents": "posfair_llamaindex.jobs.distributed.actors",
    "PosFairQdrantDatasink": "posfair_llamaindex.jobs.distributed.sink",
    "ray_ingest": "posfair_llamaindex.jobs.distributed.pipeline",
}

__all__ = sorted(_WHERE)

if TYPE_CHECKING:
    from posfair_llamaindex.jobs.distributed.actors import EmbedDocuments, prepare_documents
    from posfair_llamaindex.jobs.distributed.pipeline import ray_ingest
    from posfair_llamaindex.jobs.distributed.ray_config import QdrantTarget, RayIngestConfig
    from posfair_llamaindex.jobs.distributed.requirements import RAY_INSTALL_HINT, ray_available, require_ray
    from posfair_llamaindex.jobs.distributed.sink import PosFairQdrantDatasink


__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
