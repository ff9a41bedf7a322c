"""``ray_ingest``: one-process ``posfair ingest``, scaled out on Ray Data.

The driver lists the files, loads the embedding once to learn its tag, and creates or checks the tagged
collection before any work starts. Then Ray Data streams:

    file paths -> prepare_documents (Ray tasks: read, split, drop nodes stored unchanged)
               -> EmbedDocuments (fixed actor pool, one encoder each, GPUs when there are)
               -> Qdrant: PosFairQdrantDatasink (server: parallel write tasks) or the driver (embedded folder)

Points, ids and payloads are those of one-process ingest, every point carries the tag's fingerprint, and a
rerun (after a crash too) embeds only what is missing. A batch that raises runs again, up to
``max_batch_retries`` times, and one whose actor dies runs again on a restarted actor; Qdrant requests are
retried with backoff.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Optional

from posfair_llamaindex.jobs.distributed.requirements import RAY_MISSING

try:
    import ray
    from ray.data import ActorPoolStrategy, DataContext, TaskPoolStrategy
except ImportError as error:
    raise ImportError(RAY_MISSING) from error

from posfair_llamaindex.embedding import PosFairEmbedding
from posfair_llamaindex.jobs.distributed.actors import EmbedDocuments, ParserConfig, prepare_documents
from posfair_llamaindex.jobs.distributed.lookup import ServerLookup, snapshot
from posfair_llamaindex.jobs.distributed.ray_config import QdrantTarget, RayIngestConfig
from posfair_llamaindex.jobs.distributed.rows import from_table
from posfair_llamaindex.jobs.distributed.sink import PosFairQdrantDatasink
from posfair_llamaindex.jobs.distributed.store_layout import StoreLayout
from posfair_llamaindex.jobs.distributed.writer import WriteCounts, write_rows
from posfair_llamaindex.jobs.ingest import (
    DEFAULT_MAX_FILE_BYTES,
    READABLE_SUFFIXES,
    IngestReport,
    candidate_files,  # the file listing of one-process ingest: the same files, in the same order
)
from posfair_llamaindex.qdrant.store import tagged_vector_store

logger = logging.getLogger(__name__)


def ray_ingest(
    paths: Sequence[str],
    embed_model: PosFairEmbedding,
    target: QdrantTarget,
    settings: Optional[RayIngestConfig] = None,
    *,
    client: Any = None,
    recreate: bool = False,
    node_tokens: Optional[int] = None,
    node_overlap: int = 0,
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
    embedder: type[EmbedDocuments] = EmbedDocuments,
) -> IngestReport:
    """Ingest ``.txt``/``.md`` files and folders into ``target``'s collection on Ray; returns what was done.

    ``embed_model`` is the driver's copy: it gives the tag, the splitter's token window and the settings the
    actors load (on their own device: CUDA with GPUs, else CPU; precision ``settings.dtype`` or its own).
    ``client`` is an already open client for ``target`` (needed for an embedded folder this process holds).
    ``node_tokens``/``node_overlap`` are ``posfair ingest``'s ``--node-tokens``/``--node-overlap``.
    ``embedder`` may be a subclass of :class:`EmbedDocuments` (to instrument it, say).
    """
    settings = settings or RayIngestConfig()
    if not isinstance(embed_model, PosFairEmbedding):
        raise TypeError(f"embed_model must be a PosFairEmbedding, got {type(embed_model).__name__}")
    if not (isinstance(embedder, type) and issubclass(embedder, EmbedDocuments)):
        raise TypeError(f"embedder must be EmbedDocuments or a subclass, got {embedder!r}")
    files = list_files(paths)
    parser = ParserConfig.of(embed_model, node_tokens, node_overlap)
    own_client = client is None
    client = target.connect() if own_client else client
    try:
        # before any work: the collection exists with this embedding's tag, or the job is refused here
        store = tagged_vector_store(
            client,
            target.collection,
            embed_model,
            recreate=recreate,
            retry=settings.retry,
            collection_options=target.collection_options(),
        )
        layout = StoreLayout.of(store)
        if target.is_server:
            lookup: Any = ServerLookup(target, layout, settings.retry)
        else:  # one process may open the folder: the driver reads what is stored, and writes
            lookup = snapshot(client, target.collection, layout.fingerprint, settings.retry)
        start_ray(settings)
        actor = actor_resources(settings, server=target.is_server)
        with _job_context(settings):
            dataset = _dataset(files, parser, lookup, max_file_bytes, embed_model, settings, actor, embedder)
            if target.is_server:
                sink = PosFairQdrantDatasink(target, layout, retry=settings.retry, upload_points=settings.upload_points)
                dataset.write_datasink(
                    sink, ray_remote_args={"num_cpus": settings.writer_cpus}, concurrency=actor.writers
                )
                counts = sink.counts or WriteCounts()
            else:
                counts = WriteCounts()
                for batch in dataset.iter_batches(batch_size=None, batch_format="pyarrow"):
                    counts = counts + write_rows(
                        store, from_table(batch), retry=settings.retry, upload_points=settings.upload_points
                    )
    finally:
        if own_client:
            client.close()
    return IngestReport(
        documents=counts.documents,
        nodes=counts.nodes,
        embedded=counts.embedded,
        unchanged=counts.unchanged,
        skipped=sorted(counts.skipped, key=lambda item: str(item.path)),
    )


@dataclass(frozen=True)
class ActorResources:
    gpus: float
    cpus: float
    prepare_tasks: Optional[int]  # most reading tasks at once (None: as resources allow)
    writers: Optional[int]  # most write tasks at once

    @property
    def device(self) -> str:
        return "cuda" if self.gpus > 0 else "cpu"

    @property
    def threads(self) -> Optional[int]:
        """torch threads of a CPU actor: its CPUs, rounded up (None on a GPU: torch's own choice)."""
        return None if self.gpus > 0 else max(1, math.ceil(self.cpus))


def list_files(paths: Sequence[str]) -> list[str]:
    """The files ``posfair ingest`` would read, in its order; a missing path or no file at all is an error."""
    return [str(path) for path in candidate_files(paths, READABLE_SUFFIXES)]


def actor_settings(embed_model: PosFairEmbedding, settings: RayIngestConfig, actor: ActorResources) -> dict:
    """What each embedding actor loads: the driver's embedding on the actor's device and precision."""
    return {**embed_model.constructor_settings(), "device": actor.device, "dtype": settings.dtype or embed_model.dtype}


def _dataset(files, parser, lookup, max_file_bytes, embed_model, settings, actor: ActorResources, embedder):
    data = ray.data.from_items([{"path": path} for path in files])
    prepared = data.map_batches(
        prepare_documents,
        fn_kwargs={"parser": parser, "lookup": lookup, "max_file_bytes": max_file_bytes},
        batch_size=settings.batch_size,
        batch_format="pyarrow",
        compute=TaskPoolStrategy(size=actor.prepare_tasks),
        num_cpus=settings.prepare_cpus,
    )
    return prepared.map_batches(
        embedder,
        fn_constructor_kwargs={
            "settings": actor_settings(embed_model, settings, actor),
            "fingerprint": embed_model.fingerprint(),
            "threads": actor.threads,
        },
        batch_size=settings.batch_size,
        batch_format="pyarrow",
        compute=ActorPoolStrategy(size=settings.actors),
        num_cpus=actor.cpus,
        num_gpus=actor.gpus,
    )


def start_ray(settings: RayIngestConfig) -> None:
    if ray.is_initialized():
        if settings.address is not None:
            logger.warning("Ray is already initialised in this process; address %r is not used", settings.address)
        return
    ray.init(address=settings.address, runtime_env=settings.runtime_env)


def actor_resources(settings: RayIngestConfig, *, server: bool) -> ActorResources:
    """Resolve GPUs and CPUs per actor, and refuse at once a pool that can never start (not wait forever)."""
    resources = ray.cluster_resources()
    gpus = settings.gpus_per_actor
    if gpus is None:
        gpus = 1.0 if resources.get("GPU", 0) > 0 else 0.0
    # on CPU the actors are the work: one reading task and one write task at a time feed them, and the
    # actors share the rest; with GPUs, reading and writing may use whatever CPUs the actors leave
    on_cpu = gpus == 0
    prepare_tasks = settings.prepare_tasks or (1 if on_cpu else None)
    writers = (settings.writers or (1 if on_cpu else None)) if server else None
    others = settings.prepare_cpus * (prepare_tasks or 1) + (settings.writer_cpus * (writers or 1) if server else 0.0)
    cpus = settings.cpus_per_actor
    if cpus is None:
        spare = (resources.get("CPU", 0.0) - others) / settings.actors
        cpus = 1.0 if not on_cpu else math.floor(max(spare, 0.0) * 100) / 100
    wanted = {"CPU": settings.actors * cpus + others, "GPU": settings.actors * gpus}
    short = {name: (need, resources.get(name, 0.0)) for name, need in wanted.items() if need > resources.get(name, 0)}
    if cpus <= 0 or short:
        detail = ", ".join(f"{need:g} {name} needed, {have:g} in the cluster" for name, (need, have) in short.items())
        message = (
            f"{settings.actors} embedding actor(s) with {cpus:g} CPU and {gpus:g} GPU each, plus the reading"
            f"{' and write' if server else ''} tasks, do not fit: {detail or 'no CPU left for the actors'}. "
            "Lower --actors or --gpus-per-actor, or add nodes"
        )
        if cpus <= 0 or (settings.address is None and not os.environ.get("RAY_ADDRESS")):  # a local Ray does not grow
            raise ValueError(message)
        logger.warning("%s; the job waits until the cluster has them", message)
    return ActorResources(gpus=gpus, cpus=cpus, prepare_tasks=prepare_tasks, writers=writers)


@contextmanager
def _job_context(settings: RayIngestConfig) -> Iterator[None]:
    """Run a batch that raised again, at most ``max_batch_retries`` times; show or hide the progress bars.

    A batch whose worker process dies is run again by Ray Data itself, on a restarted actor; an actor
    that cannot start (no model, another fingerprint) ends the job at once with its error.
    """
    context = DataContext.get_current()
    names = ("retried_map_errors", "max_map_retries", "enable_progress_bars")
    saved = {name: getattr(context, name) for name in names}
    context.retried_map_errors = True
    context.max_map_retries = settings.max_batch_retries
    context.enable_progress_bars = settings.show_progress
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(context, name, value)
