"""The per-mode rules in modes.py: which mode-specific settings a mode takes, and what it fills in once the model's
pooling is known (dual documents' strength and fusion, windows mode's fusion)."""

from __future__ import annotations

import pytest

from posfair_llamaindex.modes import DUAL_DEFAULTS, WINDOWS_FUSION, ModeDefaults, document_mode
from posfair_llamaindex.options import POOLINGS

SETTING = object()  # stands for a settings object: the rules look only at whether one was given


def test_every_pooling_has_dual_defaults():
    assert set(DUAL_DEFAULTS) == set(POOLINGS)


@pytest.mark.parametrize("pooling", sorted(DUAL_DEFAULTS))
def test_dual_mode_takes_the_strength_and_fusion_of_its_pooling(pooling):
    assert document_mode("dual").defaults(pooling) == ModeDefaults(
        strength=DUAL_DEFAULTS[pooling]["strength"], fusion=DUAL_DEFAULTS[pooling]["fusion"]
    )


def test_the_dual_defaults_are_the_published_ones():
    assert {pooling: (d["strength"], d["fusion"]) for pooling, d in DUAL_DEFAULTS.items()} == {
        "first": (1.0, "max"),
        "last": (1.0, "max"),
        "mean": (0.85, "max"),
    }
    assert WINDOWS_FUSION == "max"


@pytest.mark.parametrize("pooling", sorted(DUAL_DEFAULTS))
def test_windows_with_a_dual_document_takes_the_dual_strength_and_the_windows_fusion(pooling):
    defaults = document_mode("windows").defaults(pooling, "dual")
    assert defaults == ModeDefaults(strength=DUAL_DEFAULTS[pooling]["strength"], fusion=WINDOWS_FUSION)


@pytest.mark.parametrize("document", ["plain", "calibrated", "none"])
def test_windows_with_another_document_takes_only_its_fusion(document):
    # no strength, and the pooling is not looked up (a wrapped model has none)
    assert document_mode("windows").defaults(None, document) == ModeDefaults(strength=None, fusion=WINDOWS_FUSION)


@pytest.mark.parametrize("mode", ["calibrated", "plain", "sea"])
@pytest.mark.parametrize("pooling", [*sorted(DUAL_DEFAULTS), None])
def test_single_vector_modes_fill_in_nothing(mode, pooling):
    assert document_mode(mode).defaults(pooling) == ModeDefaults(strength=None, fusion=None)


def test_windows_mode_needs_its_document_to_give_defaults():
    with pytest.raises(ValueError, match="needs its document vector"):
        document_mode("windows").defaults("first")


@pytest.mark.parametrize(("mode", "window_document"), [("dual", None), ("windows", "dual")])
def test_a_dual_document_refuses_strength_zero(mode, window_document):
    spec = document_mode(mode)
    message = (
        f"mode {mode!r} with a dual document needs a calibrated half: strength 0 would store the plain vector twice"
    )
    with pytest.raises(ValueError) as refused:
        spec.check_strength(0.0, window_document)
    assert str(refused.value) == message
    spec.check_strength(0.5, window_document)


@pytest.mark.parametrize(
    ("mode", "window_document"), [("calibrated", None), ("plain", None), ("sea", None), ("windows", "calibrated")]
)
def test_other_documents_take_strength_zero(mode, window_document):
    document_mode(mode).check_strength(0.0, window_document)


@pytest.mark.parametrize(
    ("mode", "settings"),
    [
        ("calibrated", {}),
        ("plain", {}),
        ("sea", {"chunker": SETTING}),
        ("dual", {"fusion": "rrf"}),
        ("windows", {"windows": SETTING, "fusion": "sum"}),
    ],
)
def test_each_mode_takes_its_own_settings(mode, settings):
    document_mode(mode).check_settings(**settings)


@pytest.mark.parametrize(
    ("mode", "settings", "message"),
    [
        ("calibrated", {"chunker": SETTING}, "chunker settings are only used by mode 'sea', not 'calibrated'"),
        ("windows", {"chunker": SETTING}, "chunker settings are only used by mode 'sea', not 'windows'"),
        ("sea", {"windows": SETTING}, "windows settings are only used by mode 'windows', not 'sea'"),
        ("dual", {"windows": SETTING}, "windows settings are only used by mode 'windows', not 'dual'"),
        ("plain", {"fusion": "max"}, "fusion is only used by modes 'dual' and 'windows', not 'plain'"),
        ("sea", {"fusion": "rrf"}, "fusion is only used by modes 'dual' and 'windows', not 'sea'"),
        ("calibrated", {"fusion": "sum"}, "fusion is only used by modes 'dual' and 'windows', not 'calibrated'"),
    ],
)
def test_a_mode_refuses_the_settings_of_another(mode, settings, message):
    with pytest.raises(ValueError) as refused:
        document_mode(mode).check_settings(**settings)
    assert str(refused.value) == message


def test_chunker_and_windows_are_refused_before_fusion():
    with pytest.raises(ValueError, match="chunker settings"):
        document_mode("plain").check_settings(chunker=SETTING, fusion="max")
