"""``ray_upgrade``: ``posfair upgrade`` with the calibrated vectors computed by a pool of Ray actors.

The driver does what one-process upgrade does (checks the source, re-encodes the sample plain, reads the
source page by page, skips points already written, writes); only the calibrated forward passes, the expensive
part, go to the actors, each of which loads the encoder once. So the collection written is the one
``upgrade_collection`` writes, and a killed run resumes the same way. The driver writes, so an embedded
folder (one process at a time) works as well as a server.
"""

from __future__ import annotations

from typing import Any, Optional

from posfair_llamaindex.jobs.distributed.requirements import RAY_MISSING

try:
    import ray
    from ray.util import ActorPool
except ImportError as error:
    raise ImportError(RAY_MISSING) from error

from posfair_llamaindex.embedding import PosFairEmbedding
from posfair_llamaindex.jobs.distributed.pipeline import actor_resources, actor_settings, start_ray
from posfair_llamaindex.jobs.distributed.ray_config import RayIngestConfig
from posfair_llamaindex.qdrant.upgrade import UpgradeConfig, UpgradeReport, computed_part, upgrade_collection


@ray.remote
class CalibratedEncoder:
    """One encoder per actor, loaded once; refuses to encode if it loads another fingerprint than the driver's."""

    def __init__(self, settings: dict[str, Any], fingerprint: str, threads: Optional[int]) -> None:
        if threads:
            import torch

            torch.set_num_threads(threads)
        self._embedding = PosFairEmbedding(**settings)
        if self._embedding.fingerprint() != fingerprint:
            raise RuntimeError(
                f"the actor loaded {settings['model_name']} with fingerprint {self._embedding.fingerprint()}, "
                f"the driver's is {fingerprint}: the model differs between the machines"
            )

    def encode(self, texts: list[str]) -> list[list[float]]:
        return self._embedding.get_text_embedding_batch(texts)


def ray_upgrade(
    client: Any,
    embed_model: PosFairEmbedding,
    settings: UpgradeConfig,
    ray_config: Optional[RayIngestConfig] = None,
    *,
    show_progress: bool = True,
) -> UpgradeReport:
    """:func:`~posfair_llamaindex.qdrant.upgrade.upgrade_collection` with ``ray_config.actors`` actors computing the
    calibrated vectors, ``ray_config.batch_size`` texts per actor call."""
    ray_config = ray_config or RayIngestConfig()
    start_ray(ray_config)
    resources = actor_resources(ray_config, server=False)  # refuses a pool that cannot fit
    twin = computed_part(embed_model)
    kwargs = actor_settings(twin, ray_config, resources)
    actors = [
        CalibratedEncoder.options(num_cpus=resources.cpus, num_gpus=resources.gpus).remote(
            kwargs, twin.fingerprint(), resources.threads
        )
        for _ in range(ray_config.actors)
    ]
    pool = ActorPool(actors)
    size = ray_config.batch_size

    def encode(texts: list[str]) -> list[list[float]]:
        chunks = [texts[i : i + size] for i in range(0, len(texts), size)]
        return [vector for part in pool.map(lambda actor, chunk: actor.encode.remote(chunk), chunks) for vector in part]

    try:
        # a page feeds every actor once
        page = settings.model_copy(update={"batch_size": max(settings.batch_size, size * ray_config.actors)})
        return upgrade_collection(client, embed_model, page, show_progress=show_progress, encode=encode)
    finally:
        for actor in actors:
            ray.kill(actor)


__all__ = ("CalibratedEncoder", "ray_upgrade")
