"""Slow, obviously-correct references written straight from DESIGN.md §1.1, used only by the tests.

Nothing here shares code with the package: rows are calibrated one at a time with Python loops over
baskets, and the naive attention function materialises the whole eager attention matrix.
"""

from __future__ import annotations

import contextlib
import itertools
import math

import torch
from transformers import AttentionInterface
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

NAIVE_ATTENTION = "naive_eager_calibration"


def naive_calibrated_row(row, valid, isolated, pool, variant, strength, basket_size, hard_weight, kept=()):
    """One attention row (1-D, any length K) calibrated from the formulas, in float64.

    ``kept`` are [DUMP] positions: outside every basket, and their mass kept under every variant. Baskets are
    indexed as lists of positions, one basket at a time (an element at a time made the trained-model tier take a
    minute a text).
    """
    a = row.double()
    kept, isolated = list(kept), list(isolated)
    kept_mass = float(a[kept].sum())
    content = [p for p in valid if p not in isolated and p not in kept]
    if len(content) < basket_size:
        return a
    baskets = [content[i : i + basket_size] for i in range(0, len(content), basket_size)]
    masses = [float(a[basket].sum()) for basket in baskets]
    live = [m for m in masses if m > 0]
    if not live:
        return a
    out = torch.zeros_like(a)
    out[kept] = a[kept]
    if variant == "uniform":
        live_isolated = [i for i in isolated if float(a[i]) > 0]
        share = (1.0 - kept_mass) / (len(live) + len(live_isolated))
        out[live_isolated] = share
        target = share
    elif variant == "cls_soft":
        out[isolated] = a[isolated]
        target = (1.0 - kept_mass - float(a[isolated].sum())) / len(live)
    elif variant == "cls_hard":
        others = [i for i in isolated if i != pool] + kept
        out[others] = a[others]
        out[pool] = hard_weight
        target = (1.0 - hard_weight - float(a[others].sum())) / len(live)
        if target < 0:  # documented edge rule: a sink heavier than 1 - w is cut to 1 - w, content gets 0
            out[others] = a[others] * (1.0 - hard_weight) / float(a[others].sum())
            target = 0.0
    else:
        raise ValueError(variant)
    for basket, mass in zip(baskets, masses, strict=True):
        if mass > 0:
            out[basket] = target * a[basket] / mass
    return strength * out + (1.0 - strength) * a


def isolated_positions(valid, pooling, isolated_tokens=None):
    """Positions of the isolated tokens of one sequence and its pooling token (None for mean)."""
    first, last = valid[0], valid[-1]
    if isolated_tokens is None:
        isolated_tokens = {"first": ("first",), "last": ("first", "last"), "mean": ()}[pooling]
    chosen = set(isolated_tokens) | ({pooling} if pooling != "mean" else set())
    isolated = sorted({first if name == "first" else last for name in chosen})
    pool = {"first": first, "last": last, "mean": None}[pooling]
    return isolated, pool


def naive_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """Eager attention with the full [N, H, L, K] matrix, calibrated row by row when a naive plan asks."""
    plan = kwargs.get("naive_plan")
    n, heads, q_len, dim = query.shape
    groups = heads // key.shape[1]
    key = key.repeat_interleave(groups, dim=1)
    value = value.repeat_interleave(groups, dim=1)
    scale = scaling if scaling is not None else 1.0 / math.sqrt(dim)
    scores = (query.double() @ key.double().transpose(-1, -2)) * scale
    if attention_mask is not None:
        scores = scores.masked_fill(~attention_mask, torch.finfo(scores.dtype).min)
    elif getattr(module, "is_causal", False) and q_len > 1:
        causal = torch.ones(q_len, key.shape[2], dtype=torch.bool).tril()
        scores = scores.masked_fill(~causal, torch.finfo(scores.dtype).min)
    probs = torch.softmax(scores, dim=-1)
    if plan is not None and module.layer_idx in plan["layers"]:
        probs = naive_calibrated_matrix(probs, plan)
    out = (probs @ value.double()).to(value.dtype)
    return out.transpose(1, 2).contiguous(), probs


def naive_calibrated_matrix(probs, plan):
    """A whole ``[N, H, L, K]`` probability matrix with the plan's rows calibrated one at a time."""
    probs = probs.clone()
    n, heads, q_len, _ = probs.shape
    for b in range(n):
        valid = [int(p) for p in torch.nonzero(plan["valid"][b]).flatten()]
        isolated, pool = isolated_positions(valid, plan["pooling"], plan.get("isolated_tokens"))
        query_rows = [pool] if pool is not None else range(q_len)
        for h in range(heads):
            for qi in query_rows:
                probs[b, h, qi] = naive_calibrated_row(
                    probs[b, h, qi],
                    valid,
                    isolated,
                    pool,
                    plan["variant"],
                    plan["strength"],
                    plan["basket_size"],
                    plan.get("hard_weight", 0.3),
                )
    return probs


@contextlib.contextmanager
def naive_torch_attention(plan):
    """Swap ``F.softmax``, ``torch.softmax`` and ``F.scaled_dot_product_attention`` for float64 eager versions
    that calibrate.

    For models that compute attention in their own code. The i-th attention call of a forward (a softmax
    over the keys of a 4-D tensor, or an SDPA call) is taken to be layer i's. Plain monkeypatching, not
    the package's TorchFunctionMode, so the two share nothing.
    """
    functional = torch.nn.functional
    real_softmax, real_torch_softmax = functional.softmax, torch.softmax
    real_sdpa = functional.scaled_dot_product_attention
    calls = itertools.count()

    def calibrated(probs):
        return naive_calibrated_matrix(probs, plan) if next(calls) in plan["layers"] else probs

    def softmax(input, dim=None, _stacklevel=3, dtype=None):
        if input.dim() != 4 or dim not in (-1, 3):
            return real_softmax(input, dim=dim, dtype=dtype)
        return calibrated(real_torch_softmax(input.double(), dim=-1)).to(dtype or input.dtype)

    def sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
        scores = (query.double() @ key.double().transpose(-1, -2)) * (scale or 1.0 / math.sqrt(query.shape[-1]))
        if attn_mask is not None and attn_mask.dtype == torch.bool:
            scores = scores.masked_fill(~attn_mask, torch.finfo(scores.dtype).min)
        elif attn_mask is not None:
            scores = scores + attn_mask.double()
        elif is_causal:
            causal = torch.ones(query.shape[2], key.shape[2], dtype=torch.bool).tril()
            scores = scores.masked_fill(~causal, torch.finfo(scores.dtype).min)
        return (calibrated(real_torch_softmax(scores, dim=-1)) @ value.double()).to(query.dtype)

    functional.softmax, torch.softmax, functional.scaled_dot_product_attention = softmax, softmax, sdpa
    try:
        yield
    finally:
        functional.softmax, torch.softmax = real_softmax, real_torch_softmax
        functional.scaled_dot_product_attention = real_sdpa


AttentionInterface.register(NAIVE_ATTENTION, naive_attention)
AttentionMaskInterface.register(NAIVE_ATTENTION, sdpa_mask)


def naive_pool(hidden, attention_mask, pooling):
    vectors = []
    for b in range(hidden.shape[0]):
        valid = torch.nonzero(attention_mask[b]).flatten()
        if pooling == "mean":
            vectors.append(hidden[b, valid].mean(dim=0))
        else:
            vectors.append(hidden[b, valid[0] if pooling == "first" else valid[-1]])
    return torch.nn.functional.normalize(torch.stack(vectors).float(), dim=-1)
