"""CalibrationConfig: validation, layer resolution, hashing and tags."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from posfair_llamaindex.calibration.config import CalibrationConfig


def test_paper_defaults():
    config = CalibrationConfig()
    assert (config.variant, config.strength, config.basket_size, config.layers, config.hard_weight) == (
        "cls_soft",
        0.5,
        128,
        0.5,
        0.3,
    )
    assert config.isolated_tokens is None


@pytest.mark.parametrize(
    "kwargs,field",
    [
        ({"variant": "soft"}, "variant"),
        ({"strength": 1.5}, "strength"),
        ({"strength": -0.1}, "strength"),
        ({"basket_size": 0}, "basket_size"),
        ({"basket_size": 2.5}, "basket_size"),
        ({"layers": 0}, "layers"),
        ({"layers": 1.5}, "layers"),
        ({"layers": 0.0}, "layers"),
        ({"layers": True}, "layers"),
        ({"layers": ()}, "layers"),
        ({"layers": (1, 1)}, "layers"),
        ({"layers": "first"}, "layers"),
        ({"hard_weight": 1.0}, "hard_weight"),
        ({"isolated_tokens": ("middle",)}, "isolated_tokens"),
        ({"unknown": 1}, "unknown"),
    ],
)
def test_invalid_values_name_the_field(kwargs, field):
    with pytest.raises(ValidationError) as info:
        CalibrationConfig(**kwargs)
    assert field in str(info.value)


@pytest.mark.parametrize(
    "layers,count,expected",
    [
        (0.5, 6, (3, 4, 5)),
        (0.5, 7, (4, 5, 6)),
        (0.5, 1, (0,)),
        (1.0, 4, (0, 1, 2, 3)),
        (0.25, 12, (9, 10, 11)),
        ("last", 6, (5,)),
        (2, 6, (4, 5)),
        ((0, -1), 6, (0, 5)),
        ((3, 1), 6, (1, 3)),
    ],
)
def test_resolve_layers(layers, count, expected):
    assert CalibrationConfig(layers=layers).resolve_layers(count) == expected


def test_resolve_layers_rejects_out_of_range():
    with pytest.raises(ValueError, match="out of range"):
        CalibrationConfig(layers=(6,)).resolve_layers(6)
    with pytest.raises(ValueError, match="same layer twice"):
        CalibrationConfig(layers=(5, -1)).resolve_layers(6)
    with pytest.raises(ValueError, match="more layers"):
        CalibrationConfig(layers=8).resolve_layers(6)


def test_immutable_and_hashable():
    config = CalibrationConfig()
    with pytest.raises(ValidationError):
        config.strength = 0.9
    assert hash(config) == hash(CalibrationConfig())
    assert len({CalibrationConfig(), CalibrationConfig(), CalibrationConfig(strength=0.4)}) == 2


def test_tag_is_stable_and_distinguishes_settings():
    assert CalibrationConfig().fingerprint() == CalibrationConfig().fingerprint()
    assert len(CalibrationConfig().fingerprint()) == 12
    assert CalibrationConfig(strength=0.4).fingerprint() != CalibrationConfig().fingerprint()
    # hard_weight only matters under cls_hard
    assert CalibrationConfig(hard_weight=0.2).tag() == CalibrationConfig().tag()
    assert CalibrationConfig(variant="cls_hard", hard_weight=0.2).tag() != CalibrationConfig(variant="cls_hard").tag()
    # isolated tokens are a set
    assert (
        CalibrationConfig(isolated_tokens=("last", "first")).tag()
        == CalibrationConfig(isolated_tokens=("first", "last")).tag()
    )
    tag = CalibrationConfig(layers=(0, 2)).tag()
    assert tag["layers"] == [0, 2] and tag["variant"] == "cls_soft" and "schema" in tag


def test_tag_round_trips_through_json():
    import json

    config = CalibrationConfig(variant="cls_hard", layers=(1, 3), isolated_tokens=("first",))
    data = json.loads(json.dumps(config.tag()))
    data.pop("schema")
    data["layers"] = tuple(data["layers"])
    data["isolated_tokens"] = tuple(data["isolated_tokens"])
    assert CalibrationConfig(**data) == config
