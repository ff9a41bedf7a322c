"""The vectorised calibration math against the per-position reference, on randomised cases."""

from __future__ import annotations

import random

import pytest
import torch

from posfair_llamaindex.calibration.config import CalibrationConfig
from posfair_llamaindex.calibration.row_math import RowLayout, calibrate_rows
from tests.reference import isolated_positions, naive_calibrated_row

VARIANTS = ("uniform", "cls_soft", "cls_hard")
POOLINGS = ("first", "last", "mean")


def random_case(rng: random.Random, pooling: str, padding: str, dtype=torch.float32):
    """A padded batch of random attention rows plus its mask; some sequences are shorter than a basket."""
    batch = rng.randint(1, 8)
    basket = rng.choice([1, 2, 3, 5, 8, 16])
    baskets = rng.randint(1, 40)
    edges = 0 if pooling == "mean" else 2
    longest = baskets * basket - rng.randint(0, basket - 1) + edges
    lengths = [longest] + [rng.randint(max(edges + 1, 1), longest) for _ in range(batch - 1)]
    rng.shuffle(lengths)
    width = longest + rng.randint(0, 3)
    mask = torch.zeros(batch, width, dtype=torch.long)
    for b, length in enumerate(lengths):
        if padding == "right":
            mask[b, :length] = 1
        else:
            mask[b, width - length :] = 1
    heads = rng.randint(1, 4)
    generator = torch.Generator().manual_seed(rng.randint(0, 10**6))
    logits = torch.randn(batch, heads, width, generator=generator) * 2.0
    logits = logits.masked_fill(mask[:, None, :] == 0, float("-inf"))
    probs = torch.softmax(logits, dim=-1).to(dtype)
    return probs, mask, basket


def reference(probs, mask, pooling, config, prefix=0):
    """The float64 reference rows; ``prefix`` [DUMP] tokens follow the first token (which is then isolated)."""
    expected = torch.empty(probs.shape, dtype=torch.float64)
    for b in range(probs.shape[0]):
        valid = [int(p) for p in torch.nonzero(mask[b]).flatten()]
        isolated, pool = isolated_positions(valid, pooling, ("first",) if prefix else None)
        for h in range(probs.shape[1]):
            expected[b, h] = naive_calibrated_row(
                probs[b, h].float(),
                valid,
                isolated,
                pool,
                config.variant,
                config.strength,
                config.basket_size,
                config.hard_weight,
                kept=valid[1 : 1 + prefix],
            )
    return expected


def layout_for(mask, pooling, basket):
    first = pooling in ("first", "last")
    return RowLayout.from_attention_mask(
        mask,
        basket_size=basket,
        isolate_first=first,
        isolate_last=pooling == "last",
        pooling_token=None if pooling == "mean" else pooling,
    )


CASES = [
    (seed, pooling, padding, variant, strength)
    for seed, (pooling, padding, variant, strength) in enumerate(
        (p, side, v, s) for p in POOLINGS for side in ("right", "left") for v in VARIANTS for s in (0.0, 0.3, 0.5, 1.0)
    )
    if not (pooling == "mean" and variant == "cls_hard")
]


@pytest.mark.parametrize("seed,pooling,padding,variant,strength", CASES)
def test_matches_reference_float32(seed, pooling, padding, variant, strength):
    rng = random.Random(seed)
    for _ in range(3):
        probs, mask, basket = random_case(rng, pooling, padding)
        config = CalibrationConfig(variant=variant, strength=strength, basket_size=basket)
        got = calibrate_rows(probs, layout_for(mask, pooling, basket), config)
        expected = reference(probs, mask, pooling, config)
        assert got.dtype == torch.float32
        torch.testing.assert_close(got.double(), expected, atol=1e-6, rtol=0)
        sums = got.sum(-1)
        torch.testing.assert_close(sums, torch.ones_like(sums), atol=1e-5, rtol=0)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("pooling", ["first", "last"])
def test_half_precision_is_close_and_finite(dtype, variant, pooling):
    rng = random.Random(7)
    for padding in ("right", "left"):
        probs, mask, basket = random_case(rng, pooling, padding, dtype=dtype)
        config = CalibrationConfig(variant=variant, strength=0.5, basket_size=basket)
        got = calibrate_rows(probs, layout_for(mask, pooling, basket), config)
        assert got.dtype == dtype
        assert torch.isfinite(got).all()
        expected = reference(probs, mask, pooling, config)
        torch.testing.assert_close(got.double(), expected, atol=2e-2, rtol=0)


def test_mean_pooling_half_precision_is_finite():
    probs, mask, basket = random_case(random.Random(3), "mean", "left", dtype=torch.bfloat16)
    got = calibrate_rows(probs, layout_for(mask, "mean", basket), CalibrationConfig(basket_size=basket, strength=1.0))
    assert torch.isfinite(got).all()


def test_uniform_gives_every_unit_an_equal_share():
    # 2 isolated tokens (first, last) and 10 content tokens in baskets of 4 -> 3 baskets, 5 units
    mask = torch.ones(1, 12, dtype=torch.long)
    probs = torch.softmax(torch.randn(1, 1, 12), dim=-1)
    got = calibrate_rows(
        probs, layout_for(mask, "last", 4), CalibrationConfig(variant="uniform", strength=1.0, basket_size=4)
    )[0, 0]
    assert got[0].item() == pytest.approx(0.2, abs=1e-6)
    assert got[11].item() == pytest.approx(0.2, abs=1e-6)
    for start, stop in ((1, 5), (5, 9), (9, 11)):
        assert got[start:stop].sum().item() == pytest.approx(0.2, abs=1e-6)
        ratio = got[start:stop] / probs[0, 0, start:stop]
        assert torch.allclose(ratio, ratio[0].expand_as(ratio), rtol=1e-5)  # proportions kept within a basket


def test_cls_hard_gives_pooling_token_its_weight():
    mask = torch.ones(2, 20, dtype=torch.long)
    probs = torch.softmax(torch.randn(2, 3, 20), dim=-1)
    config = CalibrationConfig(variant="cls_hard", strength=1.0, basket_size=5, hard_weight=0.3)
    got = calibrate_rows(probs, layout_for(mask, "first", 5), config)
    torch.testing.assert_close(got[..., 0], torch.full((2, 3), 0.3))


def test_heavy_sink_under_cls_hard_still_sums_to_one():
    # last-token pooling isolates the first token too; give it 0.9 of the mass (an attention sink)
    row = torch.full((1, 1, 30), 0.1 / 29)
    row[0, 0, 0] = 0.9
    mask = torch.ones(1, 30, dtype=torch.long)
    config = CalibrationConfig(variant="cls_hard", strength=1.0, basket_size=4, hard_weight=0.3)
    got = calibrate_rows(row, layout_for(mask, "last", 4), config)[0, 0]
    assert got.sum().item() == pytest.approx(1.0, abs=1e-6)
    assert got[-1].item() == pytest.approx(0.3)
    assert (got >= 0).all()


def test_zero_mass_basket_stays_zero_and_row_sums_to_one():
    mask = torch.ones(1, 13, dtype=torch.long)
    row = torch.rand(1, 1, 13)
    row[0, 0, 5:9] = 0.0  # the second basket of 4 content tokens gets nothing (as under a sliding window)
    row = row / row.sum()
    got = calibrate_rows(row, layout_for(mask, "first", 4), CalibrationConfig(strength=1.0, basket_size=4))[0, 0]
    assert torch.equal(got[5:9], torch.zeros(4))
    assert got.sum().item() == pytest.approx(1.0, abs=1e-6)
    assert got[1:5].sum().item() == pytest.approx(got[9:13].sum().item(), abs=1e-6)


def test_short_sequences_are_returned_unchanged_bit_for_bit():
    mask = torch.tensor([[1] * 40, [1] * 6 + [0] * 34])
    probs = torch.softmax(torch.randn(2, 2, 40).masked_fill(mask[:, None] == 0, float("-inf")), dim=-1)
    got = calibrate_rows(probs, layout_for(mask, "first", 8), CalibrationConfig(strength=1.0, basket_size=8))
    assert torch.equal(got[1], probs[1])
    assert not torch.equal(got[0], probs[0])


def test_layout_rejects_holes_and_empty_rows():
    with pytest.raises(ValueError, match="contiguous"):
        layout_for(torch.tensor([[1, 0, 1, 1]]), "first", 2)
    with pytest.raises(ValueError, match="at least one valid token"):
        layout_for(torch.tensor([[0, 0, 0]]), "first", 2)


def test_cls_hard_without_pooling_token_is_refused():
    mask = torch.ones(1, 10, dtype=torch.long)
    with pytest.raises(ValueError, match="cls_hard"):
        calibrate_rows(torch.full((1, 1, 10), 0.1), layout_for(mask, "mean", 2), CalibrationConfig(variant="cls_hard"))


PREFIX_CASES = [
    (pooling, padding, variant, prefix)
    for pooling in POOLINGS
    for padding in ("right", "left")
    for variant in VARIANTS
    for prefix in (1, 4)
    if not (pooling == "mean" and variant == "cls_hard")
]


@pytest.mark.parametrize("pooling,padding,variant,prefix", PREFIX_CASES)
def test_dump_prefix_is_isolated_and_keeps_its_mass(pooling, padding, variant, prefix):
    """[DUMP] tokens after the first token sit in no basket and keep their mass, whatever the variant."""
    rng = random.Random(f"{pooling}-{padding}-{variant}-{prefix}")
    checked = 0
    while checked < 3:
        probs, mask, basket = random_case(rng, pooling, padding)
        if bool((mask.sum(dim=1) < 2 + prefix).any()):  # every sequence needs room for [CLS] + the prefix
            continue
        checked += 1
        config = CalibrationConfig(variant=variant, strength=0.8, basket_size=basket)
        layout = RowLayout.from_attention_mask(
            mask,
            basket_size=basket,
            isolate_first=True,
            isolate_last=pooling == "last",
            pooling_token=None if pooling == "mean" else pooling,
            prefix_tokens=prefix,
        )
        got = calibrate_rows(probs, layout, config)
        torch.testing.assert_close(got.double(), reference(probs, mask, pooling, config, prefix), atol=1e-6, rtol=0)
        dumps = layout.prefix[:, None, :].expand(-1, probs.shape[1], -1)
        if variant != "cls_hard":  # cls_hard may shrink a too-heavy sink; otherwise the mass stays
            torch.testing.assert_close(got.gather(-1, dumps), probs.gather(-1, dumps), atol=1e-7, rtol=0)
        sums = got.sum(-1)
        torch.testing.assert_close(sums, torch.ones_like(sums), atol=1e-5, rtol=0)


def test_prefix_needs_an_isolated_first_token_and_room():
    mask = torch.ones(2, 6, dtype=torch.long)
    with pytest.raises(ValueError, match="first token, which must then be isolated"):
        RowLayout.from_attention_mask(
            mask, basket_size=2, isolate_first=False, isolate_last=False, pooling_token=None, prefix_tokens=2
        )
    with pytest.raises(ValueError, match="cannot hold its first token and 6 prefix"):
        RowLayout.from_attention_mask(
            mask, basket_size=2, isolate_first=True, isolate_last=False, pooling_token="first", prefix_tokens=6
        )
    layout = RowLayout.from_attention_mask(
        mask, basket_size=2, isolate_first=True, isolate_last=False, pooling_token="first", prefix_tokens=2
    )
    assert layout.prefix.tolist() == [[1, 2], [1, 2]] and layout.content_start.tolist() == [3, 3]
    assert layout.content_len.tolist() == [3, 3]
