"""What a Ray ingestion job runs on: the Qdrant target and the Ray resources, validated before anything starts.

Both are pydantic models, so a job's settings can be built from a config file, printed and compared. Nothing
here imports Ray.
"""

from __future__ import annotations

from typing import Any, Optional

from pydantic import BaseModel, ConfigDict, Field, model_validator

from posfair_llamaindex.jobs.distributed import defaults
from posfair_llamaindex.options import DType
from posfair_llamaindex.qdrant.retry import DEFAULT_RETRY, RetryConfig


class QdrantTarget(BaseModel):
    """Where the vectors go: a Qdrant server (``url``) or an embedded folder (``path``), and the collection.

    Against a server every Ray write task opens its own client, so writes go out in parallel. An embedded
    folder can be opened by one process only, so the driver writes the batches as they come back.
    ``shard_number``, ``replication_factor`` and ``write_consistency_factor`` are used when the collection
    is created (a server cluster); an existing collection keeps its own.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    collection: str = Field(min_length=1, description="Collection name.")
    url: Optional[str] = Field(default=None, description="Qdrant server URL, e.g. http://qdrant:6333.")
    path: Optional[str] = Field(default=None, description="Embedded Qdrant folder (one process at a time).")
    api_key: Optional[str] = Field(default=None, repr=False, description="Qdrant API key.")
    timeout: int = Field(default=30, ge=1, description="Seconds per Qdrant request.")
    shard_number: Optional[int] = Field(default=None, ge=1, description="Shards of a new collection.")
    replication_factor: Optional[int] = Field(default=None, ge=1, description="Copies of each shard.")
    write_consistency_factor: Optional[int] = Field(
        default=None, ge=1, description="Replicas that must acknowledge a write."
    )

    @model_validator(mode="after")
    def _one_place(self) -> QdrantTarget:
        if (self.url is None) == (self.path is None):
            raise ValueError("give exactly one of url (a Qdrant server) and path (an embedded Qdrant folder)")
        if self.path is not None and any(
            value is not None for value in (self.shard_number, self.replication_factor, self.write_consistency_factor)
        ):
            raise ValueError(
                "shard_number, replication_factor and write_consistency_factor configure a Qdrant cluster; "
                "an embedded folder has one shard and no replicas"
            )
        return self

    @property
    def is_server(self) -> bool:
        return self.url is not None

    @property
    def where(self) -> str:
        return self.url or str(self.path)

    def collection_options(self) -> dict[str, Any]:
        """The cluster options that were given, as ``create_collection`` keyword arguments."""
        names = ("shard_number", "replication_factor", "write_consistency_factor")
        return {name: getattr(self, name) for name in names if getattr(self, name) is not None}

    def connect(self, *, check_compatibility: bool = True):
        """A new ``QdrantClient`` for this target (workers skip the version check the driver already did)."""
        from qdrant_client import QdrantClient

        if self.url is not None:
            return QdrantClient(
                url=self.url, api_key=self.api_key, timeout=self.timeout, check_compatibility=check_compatibility
            )
        from posfair_llamaindex.qdrant.embedded import open_embedded

        return open_embedded(self.path)  # the engine that wrote the folder; a new one is a Qdrant Edge store


class RayIngestConfig(BaseModel):
    """The Ray side of an ingestion job: the cluster, the actor pools, batching and retries.

    Files are read and split by Ray tasks (``prepare_cpus`` each; a worker process loads the model's
    tokenizer once and keeps it); documents are embedded by a fixed pool of ``actors`` actors, each loading
    the encoder once, with ``gpus_per_actor`` GPUs each. A batch is ``batch_size`` documents. A batch that
    raises is run again, up to ``max_batch_retries`` times; one whose actor dies is run again on a restarted
    actor (Ray's own recovery); Qdrant requests are retried as ``retry`` says.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    address: Optional[str] = Field(
        default=None, description="Ray cluster address for ray.init (None: RAY_ADDRESS, else a local Ray)."
    )
    actors: int = Field(default=defaults.ACTORS, ge=1, description="Embedding actors (each loads the encoder once).")
    gpus_per_actor: Optional[float] = Field(
        default=None, ge=0, description="GPUs per embedding actor; None: 1 when the cluster has GPUs, else 0."
    )
    cpus_per_actor: Optional[float] = Field(
        default=None,
        gt=0,
        description="CPUs per embedding actor; None: 1 with GPUs, else what the cluster leaves, shared out. "
        "Without GPUs an actor runs that many torch threads, rounded up.",
    )
    dtype: Optional[DType] = Field(default=None, description="Precision of the actors' model; None: the embedding's.")
    batch_size: int = Field(default=defaults.BATCH_SIZE, ge=1, description="Documents per actor batch.")
    prepare_cpus: float = Field(default=0.25, gt=0, description="CPUs per task reading and splitting files.")
    prepare_tasks: Optional[int] = Field(
        default=None,
        ge=1,
        description="Most reading tasks at once; None: 1 when the actors embed on CPU (they get the CPUs), "
        "else as resources allow.",
    )
    writers: Optional[int] = Field(
        default=None,
        ge=1,
        description="Most Qdrant write tasks at once (server); None: 1 when the actors embed on CPU, else as "
        "resources allow.",
    )
    writer_cpus: float = Field(default=0.25, gt=0, description="CPUs per Qdrant write task (server).")
    upload_points: int = Field(default=defaults.UPLOAD_POINTS, ge=1, description="Points per Qdrant upsert request.")
    max_batch_retries: int = Field(
        default=3, ge=0, description="Runs of a batch that raised, after the first (Ray Data's max_map_retries)."
    )
    retry: RetryConfig = Field(default=DEFAULT_RETRY, description="Retries of Qdrant requests.")
    runtime_env: Optional[dict[str, Any]] = Field(
        default=None, description="Ray runtime_env for ray.init (e.g. pip packages for the workers)."
    )
    show_progress: bool = Field(default=True, description="Ray Data's progress bars.")
