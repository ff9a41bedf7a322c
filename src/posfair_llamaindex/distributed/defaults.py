"""Defaults of the Ray ingestion settings, importable without Ray, Qdrant or pydantic (the CLI's --help shows them)."""

ACTORS = 1  # embedding actors
BATCH_SIZE = 16  # documents per actor batch
