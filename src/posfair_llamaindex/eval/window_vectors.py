"""Window vectors for the evaluation: windows mode's own, and the two alternatives it is measured against.

A document's window vectors score a query by their best cosine (MaxSim). Three ways of getting them:

- ``windows``: windows mode itself (:class:`~posfair_llamaindex.encoding.windows.WindowEmbedder`): each window of the
  text encoded on its own, plain.
- ``late``: "late chunking": one pass over the whole document (truncated at the model's limit), and each
  window's vector the mean of that pass's token states over the window's tokens. One pass instead of one per
  window, but every window sees the whole document.
- ``nodes``: what a user gets by splitting smaller: LlamaIndex's ``SentenceSplitter`` cuts the document into
  nodes of ``size`` tokens of the model's tokenizer (overlap ``size - stride``), each node is embedded plain,
  and a hit on a node counts for its parent document (the document's score is its best node's).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from posfair_llamaindex.encoding.encoder import PosFairEncoder
from posfair_llamaindex.encoding.windows import WindowConfig, WindowEmbedder, window_spans
from posfair_llamaindex.options import WINDOW_SOURCES


def window_vectors(
    source: str, encoder: PosFairEncoder, texts: Sequence[str], config: WindowConfig, prompt: str, batch_size: int
) -> list[np.ndarray]:
    """Each text's window vectors (``[windows, dim]``, L2-normalised) from ``source``."""
    if source == "windows":
        return WindowEmbedder(encoder, config).encode(texts, prompt=prompt, batch_size=batch_size)
    if source == "late":
        return late_chunked(encoder, texts, config, prompt, batch_size)
    if source == "nodes":
        return node_split(encoder, texts, config, prompt, batch_size)
    raise ValueError(f"window source must be one of {WINDOW_SOURCES}, got {source!r}")


def late_chunked(
    encoder: PosFairEncoder, texts: Sequence[str], config: WindowConfig, prompt: str, batch_size: int
) -> list[np.ndarray]:
    """Windows mean-pooled from one whole-document pass (the windows past the model's limit are lost)."""
    span = encoder.prompt_span(prompt)
    tokenized = encoder.tokenize_texts(list(texts), prompt)
    lead = max(1, span.length)  # [CLS] and the prompt's tokens (a prompt's length counts [CLS]) precede the text
    out: list[np.ndarray] = [np.empty(0)] * len(texts)
    order = sorted(range(len(texts)), key=lambda i: -tokenized.lengths[i])
    for start in range(0, len(order), batch_size):
        chosen = order[start : start + batch_size]
        batch = encoder.pad([tokenized.inputs[i] for i in chosen])
        with torch.inference_mode():
            states = encoder.model(**{k: v.to(encoder.device) for k, v in batch.items()}).last_hidden_state.float()
        for row, index in enumerate(chosen):
            count = int(batch["attention_mask"][row].sum()) - lead - 1  # text tokens that fit, [SEP] left out
            spans = window_spans(list(range(count)), config.size, config.step)  # every token its own "word"
            pooled = torch.stack([states[row, lead + a : lead + b].mean(dim=0) for a, b in spans])
            out[index] = torch.nn.functional.normalize(pooled, dim=-1).cpu().numpy()
    return out


def node_split(
    encoder: PosFairEncoder, texts: Sequence[str], config: WindowConfig, prompt: str, batch_size: int
) -> list[np.ndarray]:
    """Each text split into LlamaIndex nodes of ``size`` tokens, every node embedded plain."""
    from llama_index.core.node_parser import SentenceSplitter

    def tokens(text: str) -> list:
        with encoder._tokenizer_lock:
            return encoder.tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"]

    splitter = SentenceSplitter(
        chunk_size=config.size, chunk_overlap=config.size - config.step, tokenizer=tokens, include_metadata=False
    )
    pieces = [[p for p in splitter.split_text(text) if p.strip()] or [text] for text in texts]
    flat = [piece for per_text in pieces for piece in per_text]
    vectors = encoder.encode(flat, None, batch_size=batch_size, normalize=True, prompt=prompt)
    out, start = [], 0
    for per_text in pieces:
        out.append(vectors[start : start + len(per_text)])
        start += len(per_text)
    return out


def max_sim(queries: np.ndarray, windows: Sequence[np.ndarray]) -> np.ndarray:
    """``[queries, documents]``: each document's best window cosine for each query."""
    counts = np.array([len(w) for w in windows])
    if (counts < 1).any():
        raise ValueError("every document needs at least one window")
    scores = queries @ np.concatenate(windows).T
    return np.maximum.reduceat(scores, np.concatenate([[0], np.cumsum(counts)[:-1]]), axis=1)


__all__ = ("late_chunked", "max_sim", "node_split", "window_vectors")
