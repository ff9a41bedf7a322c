"""Diagnostics on a user's own texts: where the pooling token looks, and which part of a text a vector represents.

* Self-mass per layer: the share of the pooling token's attention that goes to itself, per layer, over
  heads and texts (the paper's Figure 2), plain vs calibrated.
* Segment profile: the cosine between a text's embedding and the plain embedding of each of its ten equal
  token segments. A profile that falls from the first to the last segment is position bias; a flat one is fair.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Optional

import numpy as np
import torch

from posfair_llamaindex.calibration.config import CalibrationConfig
from posfair_llamaindex.encoding.encoder import PosFairEncoder, check_texts
from posfair_llamaindex.eval import plots
from posfair_llamaindex.model.pooling import pooling_positions


def self_mass_per_layer(
    encoder: PosFairEncoder, texts: Sequence[str], calibration: Optional[CalibrationConfig], batch_size: int = 8
) -> np.ndarray:
    """``[layers, texts * heads]``: the pooling token's attention to itself (calibrated when a config is given)."""
    if encoder.pooling == "mean":
        raise ValueError(
            "self-mass needs a pooling token; this model uses mean pooling "
            "(pass pooling='first' to inspect its first token)"
        )
    texts = check_texts(texts)
    per_layer: dict[int, list[np.ndarray]] = {}
    for start in range(0, len(texts), batch_size):
        batch = list(texts[start : start + batch_size])
        positions = pooling_positions(encoder.tokenize(batch)["attention_mask"], encoder.pooling).to(encoder.device)

        def record(layer, plain, used, positions=positions):
            rows = used[torch.arange(used.shape[0], device=used.device), :, positions]  # [N, H]
            per_layer.setdefault(layer, []).append(rows.float().cpu().numpy().reshape(-1))

        encoder.encode_batch(batch, calibration, recorder=record)
    return np.stack([np.concatenate(per_layer[layer]) for layer in sorted(per_layer)])


def segment_profile(
    encoder: PosFairEncoder,
    texts: Sequence[str],
    calibration: Optional[CalibrationConfig],
    segments: int = 10,
) -> np.ndarray:
    """``[texts, segments]`` cosines between each text's embedding and its segments' plain embeddings."""
    texts = check_texts(texts)
    room = encoder.content_limit
    profiles = []
    for text in texts:
        ids = encoder.tokenizer(text, add_special_tokens=False, truncation=False, verbose=False)["input_ids"][:room]
        if len(ids) < segments:
            raise ValueError(f"a text of {len(ids)} tokens cannot be cut into {segments} segments")
        bounds = np.linspace(0, len(ids), segments + 1).round().astype(int)
        pieces = [encoder.tokenizer.decode(ids[a:b]) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
        whole = encoder.tokenizer.decode(ids)  # exactly the tokens the segments cover
        document = encoder.encode([whole], calibration)[0]
        parts = encoder.encode(pieces, None)
        profiles.append(parts @ document)
    return np.stack(profiles)


def profile_summary(profile: np.ndarray) -> dict[str, float]:
    """Mean profile, and how unequal it is: (max - min) / max, and last-third minus first-third mean."""
    mean = profile.mean(axis=0)
    third = max(1, len(mean) // 3)
    return {
        "mean_profile": [float(v) for v in mean],
        "spread": float((mean.max() - mean.min()) / mean.max()),
        "end_minus_begin": float(mean[-third:].mean() - mean[:third].mean()),
    }


def diagnose(
    encoder: PosFairEncoder,
    texts: Sequence[str],
    calibration: CalibrationConfig,
    out_dir: Path,
) -> dict[str, object]:
    """Write self_mass.png, segment_profile.png and diagnostics.json; return the numbers."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    results: dict[str, object] = {
        "model": encoder.model_name,
        "pooling": encoder.pooling,
        "calibration": calibration.tag(),
        "texts": len(texts),
    }
    layers = set(calibration.resolve_layers(encoder.num_layers))
    if encoder.pooling != "mean":
        plain = self_mass_per_layer(encoder, texts, None)
        calibrated = self_mass_per_layer(encoder, texts, calibration)
        results["self_mass"] = {
            "plain_median": [float(v) for v in np.median(plain, axis=1)],
            "calibrated_median": [float(v) for v in np.median(calibrated, axis=1)],
            "calibrated_layers": sorted(layers),
        }
        plots.save_png(plots.self_mass(plain, calibrated, layers), out_dir / "self_mass.png")
    plain_profile = segment_profile(encoder, texts, None)
    calibrated_profile = segment_profile(encoder, texts, calibration)
    results["segment_profile"] = {
        "plain": profile_summary(plain_profile),
        "calibrated": profile_summary(calibrated_profile),
    }
    figure = plots.segment_profiles([("plain", plain_profile), ("calibrated", calibrated_profile)])
    plots.save_png(figure, out_dir / "segment_profile.png")
    (out_dir / "diagnostics.json").write_text(json.dumps(results, indent=2) + "\n")
    return results
