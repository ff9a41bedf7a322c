"""Whole jobs over a corpus: one-process ingest (``ingest``) and its scale-out on Ray Data (``distributed``)."""
