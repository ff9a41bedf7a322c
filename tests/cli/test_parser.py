"""The argument parser: choices and defaults come from the library, and each command takes only what it uses."""

from __future__ import annotations

import argparse

import pytest

from posfair_llamaindex.calibration.config import CalibrationConfig
from posfair_llamaindex.cli import build_parser
from posfair_llamaindex.cli.arguments import (
    calibration_from_args,
    embedding_from_args,
    encoder_options_given,
    layers_value,
)
from posfair_llamaindex.options import CHUNKERS, DTYPES, MODES, POOLINGS, VARIANTS


def subparser(*path: str) -> argparse.ArgumentParser:
    parser = build_parser()
    for name in path:
        action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = action.choices[name]
    return parser


def option(parser: argparse.ArgumentParser, flag: str):
    return next((a for a in parser._actions if flag in a.option_strings), None)


COMMANDS = [
    ("ingest",),
    ("query",),
    ("collections",),
    ("eval",),
    ("sweep", "strength"),
    ("sweep", "grid"),
    ("diagnose",),
]


def test_choices_come_from_the_library():
    ingest = subparser("ingest")
    assert tuple(option(ingest, "--pooling").choices) == POOLINGS
    assert tuple(option(ingest, "--variant").choices) == VARIANTS
    assert tuple(option(ingest, "--mode").choices) == MODES
    assert tuple(option(ingest, "--dtype").choices) == DTYPES
    assert tuple(option(ingest, "--chunker").choices) == CHUNKERS


def test_help_defaults_are_the_config_defaults():
    ingest = subparser("ingest")
    for field in ("variant", "strength", "basket_size", "layers", "hard_weight"):
        default = CalibrationConfig.model_fields[field].default
        assert f"({default})" in option(ingest, "--" + field.replace("_", "-")).help, field


@pytest.mark.parametrize(
    "path,absent",
    [
        (("eval",), ["--mode"]),
        (("sweep", "strength"), ["--mode", "--strength", "--max-sets", "--chunker"]),
        (("sweep", "grid"), ["--mode", "--variant", "--basket-size", "--layers", "--max-sets"]),
        (("diagnose",), ["--mode", "--chunker", "--max-documents", "--scifact-sample"]),
        (("finetune",), ["--mode", "--strength", "--qdrant-path", "--configs"]),
        (("collections",), ["--model", "--mode", "--strength"]),
    ],
)
def test_commands_take_only_the_options_they_use(path, absent):
    parser = subparser(*path)
    for flag in absent:
        assert option(parser, flag) is None, (path, flag)
    with pytest.raises(SystemExit):
        parser.parse_args([absent[0], "x"])


def test_every_command_parses_its_minimal_form():
    parser = build_parser()
    minimal = {
        ("ingest",): ["ingest", "docs", "--collection", "c"],
        ("query",): ["query", "text", "--collection", "c"],
        ("collections",): ["collections"],
        ("eval",): ["eval"],
        ("sweep", "strength"): ["sweep", "strength"],
        ("sweep", "grid"): ["sweep", "grid"],
        ("diagnose",): ["diagnose", "some text"],
    }
    assert set(minimal) == set(COMMANDS)
    for argv in minimal.values():
        args = parser.parse_args(argv)
        assert callable(args.handler)


def test_unset_calibration_options_keep_the_config_defaults():
    args = build_parser().parse_args(["ingest", "d", "--collection", "c", "--strength", "0.85", "--layers", "0,-1"])
    assert calibration_from_args(args) == CalibrationConfig(strength=0.85, layers=(0, -1))
    assert encoder_options_given(args)
    plain = build_parser().parse_args(["query", "q", "--collection", "c"])
    assert calibration_from_args(plain) == CalibrationConfig() and not encoder_options_given(plain)


@pytest.mark.parametrize("text,value", [("last", "last"), ("2", 2), ("0.5", 0.5), ("0,5", (0, 5)), ("-1,", (-1,))])
def test_layers_values(text, value):
    assert layers_value(text) == value


def test_bad_layers_value_names_the_option():
    with pytest.raises(argparse.ArgumentTypeError, match="--layers"):
        layers_value("half")
    with pytest.raises(argparse.ArgumentTypeError, match="--layers list must be integers"):
        layers_value("1,x")


def test_embedding_from_args_layers_options_over_a_tag(minilm):
    args = build_parser().parse_args(["query", "q", "--collection", "c", "--model", minilm, "--strength", "0.3"])
    base = {"mode": "calibrated", "pooling": "first", "calibration": {"variant": "uniform", "basket_size": 64}}
    embedding = embedding_from_args(args, base)
    assert embedding.calibration == CalibrationConfig(variant="uniform", basket_size=64, strength=0.3)
    assert embedding.pooling == "first" and embedding.mode == "calibrated"


@pytest.mark.parametrize("path", [c for c in COMMANDS if c != ("collections",)])
def test_model_commands_take_trust_remote_code_off_by_default(path):
    flag = option(subparser(*path), "--trust-remote-code")
    assert flag is not None and flag.default is False


def test_trust_remote_code_reaches_the_loader(tmp_path):
    from tests.utils import STANDIN_SWITCHES, save_standin_model

    folder = save_standin_model(tmp_path, **STANDIN_SWITCHES["sdpa"])
    query = ["query", "q", "--collection", "c", "--model", folder]
    with pytest.raises(ValueError, match="trust_remote_code=True"):
        embedding_from_args(build_parser().parse_args(query))
    embedding = embedding_from_args(build_parser().parse_args([*query, "--trust-remote-code"]))
    assert embedding.trust_remote_code and embedding.encoder.attention_door == "interception"
