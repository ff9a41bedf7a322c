"""What identifies a set of vectors: the tag schema, its fingerprint, and which keys take part in it.

A tag is a JSON-safe dict. Collections store it in their metadata and every point carries its fingerprint,
so vectors made under different settings are never mixed. ``PosFairEmbedding.tag`` builds the full tag (the
encoder's part from ``PosFairEncoder.tag_facts``); :func:`settings_from_tag` turns one back into constructor
settings, without loading anything, so that a command can read a collection's settings before torch loads.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

# One schema number for every tag this package writes (the calibration config's and the embedding's).
TAG_SCHEMA = 1
# Bump when a change to this package changes the vectors it produces for the same settings.
ENCODING_VERSION = 1
# Recorded for people, left out of the fingerprint: the same weights loaded from another folder, or by
# another release that encodes identically, make the same vectors.
# ``embedding_source``: how the command line rebuilds a wrapped LlamaIndex embedding (its kind, name, API base,
# tokenizer); what its vectors are is the ``embedding`` entry, which takes part.
INFORMATIONAL_TAG_KEYS = ("package_version", "model", "embedding_source")
# Recorded as the collection's default, left out of the fingerprint: they decide how queries are encoded
# (the query prompt) and how a dual collection's two scores are fused, and change no stored vector.
QUERY_TIME_TAG_KEYS = ("fusion", "query_instruction")
# The keys that the loaded encoder decides (PosFairEncoder.tag_facts), where the settings alone do not: the
# weights on disk, and what the model's own files resolve.
ENCODER_TAG_KEYS = ("model_weights", "pooling", "dimension", "max_length", "prompt_in_pooling", "dump_tokens")


def fingerprint_of(tag: dict[str, Any]) -> str:
    """12 hex digits of the SHA-256 of a tag's canonical JSON."""
    canonical = json.dumps(tag, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:12]


def comparable_tag(tag: dict[str, Any]) -> dict[str, Any]:
    """The part of an embedding tag that must match for two sets of vectors to be mixed."""
    ignored = (*INFORMATIONAL_TAG_KEYS, *QUERY_TIME_TAG_KEYS, "fingerprint")
    return {key: value for key, value in tag.items() if key not in ignored}


def settings_from_tag(tag: dict[str, Any]) -> dict[str, Any]:
    """The constructor settings recorded in a tag written by :meth:`PosFairEmbedding.tag` (its inverse).

    JSON turns tuples into lists; they are turned back so the settings rebuild the same configs.
    """
    calibration = dict(tag.get("calibration") or {})
    calibration.pop("schema", None)
    for key in ("layers", "isolated_tokens"):
        if isinstance(calibration.get(key), list):
            calibration[key] = tuple(calibration[key])
    return {
        "model": tag.get("model"),
        "mode": tag.get("mode"),
        "pooling": tag.get("pooling"),
        "max_length": tag.get("max_length"),
        "normalize": tag.get("normalize", True),
        "text_instruction": tag.get("text_instruction"),
        "query_instruction": tag.get("query_instruction"),
        "calibration": calibration,
        "chunker": tag.get("chunker"),
        "windows": tag.get("windows"),
        "fusion": tag.get("fusion"),
        "embedding_source": tag.get("embedding_source"),
    }
