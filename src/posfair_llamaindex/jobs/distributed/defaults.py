"""Defaults of the Ray ingestion settings, importable without Ray, Qdrant or pydantic (the CLI's --help shows them)."""

ACTORS = 1  # embedding actors
BATCH_SIZE = 16  # documents per actor batch
UPLOAD_POINTS = 256  # points per Qdrant upsert request (about 3 MiB of REST JSON for 384-d vectors)
