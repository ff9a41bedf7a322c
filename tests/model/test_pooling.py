"""Pooling of last hidden states on hand-made tensors, under right and left padding."""

from __future__ import annotations

import pytest
import torch

from posfair_llamaindex.model.pooling import pool_hidden_states, pooling_positions

# two sequences of width 4: the first has 3 valid tokens, the second 2
RIGHT = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0]])
LEFT = torch.tensor([[0, 1, 1, 1], [0, 0, 1, 1]])
# hidden[n, l] = [10 n + l, -(10 n + l)]: every position is recognisable
HIDDEN = torch.stack([torch.tensor([[10.0 * n + k, -(10.0 * n + k)] for k in range(4)]) for n in range(2)])


@pytest.mark.parametrize(
    "mask,pooling,positions",
    [
        (RIGHT, "first", [0, 0]),
        (RIGHT, "last", [2, 1]),
        (LEFT, "first", [1, 2]),
        (LEFT, "last", [3, 3]),
        (torch.ones(2, 4, dtype=torch.long), "last", [3, 3]),
        (torch.tensor([[True, False, False, False]]), "last", [0]),
    ],
)
def test_pooling_positions(mask, pooling, positions):
    assert pooling_positions(mask, pooling).tolist() == positions


def test_mean_pooling_has_no_single_position():
    with pytest.raises(ValueError, match="no single pooling token"):
        pooling_positions(RIGHT, "mean")
    with pytest.raises(ValueError, match="'max'"):
        pooling_positions(RIGHT, "max")


@pytest.mark.parametrize(
    "mask,pooling,expected",
    [
        (RIGHT, "first", [[0, 0], [10, -10]]),
        (RIGHT, "last", [[2, -2], [11, -11]]),
        (RIGHT, "mean", [[1, -1], [10.5, -10.5]]),  # (0+1+2)/3 and (10+11)/2
        (LEFT, "first", [[1, -1], [12, -12]]),
        (LEFT, "last", [[3, -3], [13, -13]]),
        (LEFT, "mean", [[2, -2], [12.5, -12.5]]),  # (1+2+3)/3 and (12+13)/2
    ],
)
def test_pool_hidden_states(mask, pooling, expected):
    pooled = pool_hidden_states(HIDDEN, mask, pooling)
    assert pooled.shape == (2, 2)
    torch.testing.assert_close(pooled, torch.tensor(expected, dtype=torch.float32))


def test_padding_never_reaches_the_mean():
    garbage = HIDDEN.clone()
    garbage[~RIGHT.bool()] = 1e6
    torch.testing.assert_close(pool_hidden_states(garbage, RIGHT, "mean"), pool_hidden_states(HIDDEN, RIGHT, "mean"))
    # the same tokens give the same vectors whichever side the padding is on
    shifted = torch.stack([torch.roll(HIDDEN[0], 1, 0), torch.roll(HIDDEN[1], 2, 0)])
    for pooling in ("first", "last", "mean"):
        torch.testing.assert_close(
            pool_hidden_states(shifted, LEFT, pooling), pool_hidden_states(HIDDEN, RIGHT, pooling)
        )


def test_mean_keeps_the_dtype_and_a_float_mask_works():
    half = HIDDEN.to(torch.float64)
    pooled = pool_hidden_states(half, RIGHT.to(torch.float32), "mean")
    assert pooled.dtype == torch.float64
    torch.testing.assert_close(pooled, torch.tensor([[1.0, -1.0], [10.5, -10.5]], dtype=torch.float64))
