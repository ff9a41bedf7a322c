"""The all-rows path (attention over each basket alone) against the float64 row-by-row reference."""

from __future__ import annotations

import itertools

import pytest
import torch

from posfair_llamaindex.calibration import basket_attention
from posfair_llamaindex.calibration.basket_attention import calibrated_all_rows
from posfair_llamaindex.calibration.config import CalibrationConfig
from posfair_llamaindex.calibration.kernel import fused_kernel
from posfair_llamaindex.calibration.row_math import RowLayout
from tests.reference import naive_calibrated_row

LENGTHS = (37, 21, 5, 30)


@pytest.fixture(params=["compiled", "pytorch"])
def kernel_path(request, monkeypatch):
    """Both ways the all-rows pieces are computed: the compiled kernel and the PyTorch one."""
    monkeypatch.setenv(fused_kernel.ENV_SWITCH, "1" if request.param == "compiled" else "0")
    return request.param  # the third is shorter than a basket: it comes back plain


def batch(padding: str, width: int = 40):
    valid = torch.zeros(len(LENGTHS), width, dtype=torch.bool)
    for b, length in enumerate(LENGTHS):
        if padding == "right":
            valid[b, :length] = True
        else:
            valid[b, width - length :] = True
    return valid


def expected_output(q, k, v, valid, causal, isolated_of, pool_of, kept_of, config):
    """Softmax in float64 under the mask, every valid query row calibrated by the reference, times V."""
    n, heads, q_len, dim = q.shape
    groups = heads // k.shape[1]
    k = k.double().repeat_interleave(groups, dim=1)
    v = v.double().repeat_interleave(groups, dim=1)
    scores = q.double() @ k.transpose(-1, -2) * dim**-0.5
    seen = valid[:, None, None, :].expand(n, 1, q_len, q_len)
    if causal:
        seen = seen & torch.ones(q_len, q_len, dtype=torch.bool).tril()
    probs = torch.softmax(scores.masked_fill(~seen, float("-inf")), dim=-1)
    out = torch.zeros(n, heads, q_len, dim, dtype=torch.float64)
    for b in range(n):
        positions = [int(p) for p in torch.nonzero(valid[b]).flatten()]
        for h, i in itertools.product(range(heads), positions):
            # a causal row's future keys hold no mass, so their baskets are not live: the reference needs no more
            row = naive_calibrated_row(
                probs[b, h, i],
                positions,
                isolated_of(positions),
                pool_of(positions),
                config.variant,
                config.strength,
                config.basket_size,
                config.hard_weight,
                kept=kept_of(positions),
            )
            out[b, h, i] = row @ v[b, h]
    return out.transpose(1, 2)  # [N, Q, H, D]


ISOLATIONS = {
    # name: (isolate_first, isolate_last, pooling_token, prefix_tokens)
    "none": (False, False, None, 0),
    "first": (True, False, "first", 0),
    "first+last": (True, True, "last", 0),
    "first+dump2": (True, False, "first", 2),
}


def mask_forms(valid, causal, q_len):
    """The ways SDPA's mask reaches attention: none (causal flag), bool, additive float, an expanded view."""
    n = valid.shape[0]
    seen = valid[:, None, None, :].expand(n, 1, q_len, q_len)
    if causal:
        seen = seen & torch.ones(q_len, q_len, dtype=torch.bool).tril()
    floats = torch.zeros(seen.shape).masked_fill(~seen, torch.finfo(torch.float32).min)
    forms = {"bool": seen.contiguous(), "float": floats, "expanded": seen}
    if bool(valid.all()):
        forms["none"] = None
    return forms


@pytest.mark.parametrize(
    "padding,causal,isolation,variant,gqa",
    [
        ("right", False, "none", "cls_soft", False),
        ("right", False, "none", "uniform", False),
        ("left", False, "none", "cls_soft", False),
        ("left", False, "none", "uniform", True),
        ("right", True, "none", "uniform", True),
        ("left", True, "none", "cls_soft", False),
        ("right", False, "first", "cls_hard", False),
        ("left", True, "first+last", "uniform", True),
        ("left", True, "first+last", "cls_hard", False),
        ("right", False, "first+dump2", "uniform", False),
        ("left", False, "first+dump2", "cls_soft", True),
        ("right", True, "first+dump2", "cls_hard", False),
    ],
)
def test_every_row_matches_the_reference(padding, causal, isolation, variant, gqa, kernel_path):
    torch.manual_seed(0)
    valid = batch(padding)
    n, width = valid.shape
    heads, kv_heads, dim = 4, 2 if gqa else 4, 8
    q = torch.randn(n, heads, width, dim) * 1.5
    k = torch.randn(n, kv_heads, width, dim) * 1.5
    v = torch.randn(n, kv_heads, width, dim)
    first, last, pooling_token, prefix = ISOLATIONS[isolation]
    config = CalibrationConfig(variant=variant, strength=0.7, basket_size=6)
    layout = RowLayout.from_attention_mask(
        valid.long(),
        basket_size=6,
        isolate_first=first,
        isolate_last=last,
        pooling_token=pooling_token,
        prefix_tokens=prefix,
    )

    def isolated_of(positions):
        return sorted({p for p, keep in ((positions[0], first), (positions[-1], last)) if keep})

    def pool_of(positions):
        return {"first": positions[0], "last": positions[-1], None: None}[pooling_token]

    def kept_of(positions):
        return positions[1 : 1 + prefix]

    expected = expected_output(q, k, v, valid, causal, isolated_of, pool_of, kept_of, config)
    rows = valid[:, :, None].expand(n, width, heads)  # the valid query rows, [N, Q, H]
    for name, mask in mask_forms(valid, causal, width).items():
        got = calibrated_all_rows(q, k, v, mask, dim**-0.5, causal and mask is None, layout, config)
        assert got.shape == (n, width, heads, dim)
        torch.testing.assert_close(got[rows].double(), expected[rows], atol=2e-5, rtol=0, msg=name)
        assert torch.isfinite(got).all(), name  # padding rows too: they see nothing, and get zeros


def test_no_padding_and_a_causal_flag_match_an_explicit_mask():
    torch.manual_seed(1)
    n, heads, width, dim = 2, 2, 33, 8
    q, k, v = (torch.randn(n, heads, width, dim) for _ in range(3))
    valid = torch.ones(n, width, dtype=torch.long)
    layout = RowLayout.from_attention_mask(
        valid, basket_size=8, isolate_first=False, isolate_last=False, pooling_token=None
    )
    config = CalibrationConfig(variant="uniform", strength=1.0, basket_size=8)
    causal = torch.ones(width, width, dtype=torch.bool).tril()[None, None]
    by_flag = calibrated_all_rows(q, k, v, None, dim**-0.5, True, layout, config)
    by_mask = calibrated_all_rows(q, k, v, causal, dim**-0.5, False, layout, config)
    torch.testing.assert_close(by_flag, by_mask, atol=1e-6, rtol=0)
    # and without either, every row sees every key: a different result
    assert (calibrated_all_rows(q, k, v, None, dim**-0.5, False, layout, config) - by_flag).abs().max() > 1e-3


def test_strength_zero_is_plain_attention(kernel_path):
    torch.manual_seed(2)
    valid = batch("right")
    n, width = valid.shape
    q, k, v = (torch.randn(n, 2, width, 8) for _ in range(3))
    layout = RowLayout.from_attention_mask(
        valid.long(), basket_size=4, isolate_first=False, isolate_last=False, pooling_token=None
    )
    mask = valid[:, None, None, :]
    got = calibrated_all_rows(q, k, v, mask, 8**-0.5, False, layout, CalibrationConfig(strength=0.0, basket_size=4))
    plain = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask).transpose(1, 2)
    torch.testing.assert_close(got, plain, atol=2e-6, rtol=0)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_inputs_stay_close_to_float32(dtype):
    torch.manual_seed(3)
    valid = batch("right")
    n, width = valid.shape
    q, k, v = (torch.randn(n, 4, width, 16) for _ in range(3))
    layout = RowLayout.from_attention_mask(
        valid.long(), basket_size=8, isolate_first=False, isolate_last=False, pooling_token=None
    )
    config = CalibrationConfig(basket_size=8)
    mask = valid[:, None, None, :]
    full = calibrated_all_rows(q, k, v, mask, 0.25, False, layout, config)
    half = calibrated_all_rows(q.to(dtype), k.to(dtype), v.to(dtype), mask, 0.25, False, layout, config)
    assert half.dtype == dtype
    rows = valid[:, :, None].expand(n, width, 4)
    cosine = torch.nn.functional.cosine_similarity(half.float()[rows], full[rows], dim=-1)
    assert cosine.min() > 0.999


@pytest.mark.parametrize("mask_form", ["bool", "per_row", "causal"])
def test_a_basket_that_hides_nothing_goes_to_the_kernel_without_a_mask(monkeypatch, mask_form):
    monkeypatch.setenv(fused_kernel.ENV_SWITCH, "0")  # the PyTorch path, one flash call per basket
    # lengths 37 and 21, baskets of 8 from offset 0: the first two baskets are whole for both sequences, the
    # third holds the shorter one's end; a mask that differs between rows (per-row or causal) is always passed
    valid = batch("right")[:2]
    n, width = valid.shape
    q, k, v = (torch.randn(n, 2, width, 8) for _ in range(3))
    layout = RowLayout.from_attention_mask(
        valid.long(), basket_size=8, isolate_first=False, isolate_last=False, pooling_token=None
    )
    per_row = torch.zeros(n, 1, width, width).masked_fill(~valid[:, None, None, :], float("-inf"))
    per_row[:, :, 0, 3] = float("-inf")  # the first row alone does not see key 3
    masks = {"bool": valid[:, None, None, :], "per_row": per_row, "causal": None}
    seen = []
    kernel = basket_attention._attention_with_lse

    def recording(q, k, v, mask, scale):
        seen.append(mask)
        return kernel(q, k, v, mask, scale)

    monkeypatch.setattr(basket_attention, "_attention_with_lse", recording)
    config = CalibrationConfig(basket_size=8)
    calibrated_all_rows(q, k, v, masks[mask_form], 8**-0.5, mask_form == "causal", layout, config)
    assert len(seen) == layout.num_baskets
    if mask_form == "bool":
        assert seen[0] is None and seen[1] is None
        assert all(mask is not None for mask in seen[2:])
        assert bool((seen[2][1] == float("-inf")).any())  # the shorter sequence's end is hidden
    else:
        assert all(mask is not None for mask in seen)


def long_case(seed: int = 4):
    """Two sequences past one query block (256 rows) and one score chunk (512 keys), one right-padded."""
    torch.manual_seed(seed)
    n, heads, kv_heads, width, dim = 2, 4, 2, 700, 16
    valid = torch.ones(n, width, dtype=torch.long)
    valid[1, 610:] = 0
    q = torch.randn(n, width, heads, dim).transpose(1, 2)  # transformers' layout: a strided view
    k = torch.randn(n, kv_heads, width, dim)
    v = torch.randn(n, kv_heads, width, dim)
    layout = RowLayout.from_attention_mask(
        valid, basket_size=32, isolate_first=True, isolate_last=True, pooling_token=None, prefix_tokens=1
    )
    return q, k, v, valid.bool()[:, None, None, :], layout


@pytest.mark.parametrize("variant", ["uniform", "cls_soft", "cls_hard"])
def test_the_compiled_kernel_agrees_with_the_pytorch_path(monkeypatch, variant):
    q, k, v, mask, layout = long_case()
    config = CalibrationConfig(variant=variant, strength=0.8, basket_size=32)
    outputs = {}
    for switch in ("1", "0"):
        monkeypatch.setenv(fused_kernel.ENV_SWITCH, switch)
        outputs[switch] = calibrated_all_rows(q, k, v, mask, 0.25, False, layout, config)
    rows = mask[:, 0, 0, :, None].expand(-1, -1, 4)
    torch.testing.assert_close(outputs["1"][rows], outputs["0"][rows], atol=2e-6, rtol=0)
