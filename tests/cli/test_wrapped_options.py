"""--embedding: the command line's wrapped LlamaIndex embedding, refused or built before anything is embedded."""

from __future__ import annotations

import pytest

from posfair_llamaindex.cli import build_parser
from posfair_llamaindex.cli.arguments import embedding_settings
from posfair_llamaindex.cli.wrapped_options import build_wrapped
from posfair_llamaindex.errors import CliError
from tests.utils import minilm_path

WRAPPED = ["--embedding", "openai-like", "--api-base", "http://127.0.0.1:9", "--embedding-model", "served-model"]


def parse(*argv):
    return build_parser().parse_args(["ingest", "docs", "--collection", "c", *argv])


def test_modes_that_need_attention_are_refused_with_the_option_named():
    with pytest.raises(CliError, match="mode 'calibrated' cannot run over --embedding openai-like"):
        embedding_settings(parse(*WRAPPED))  # the default mode is calibrated
    with pytest.raises(CliError, match="document='dual'"):
        embedding_settings(parse(*WRAPPED, "--mode", "windows", "--window-document", "dual"))


def test_wrapped_options_need_embedding_and_one_model():
    with pytest.raises(CliError, match="--api-base go with --embedding"):
        embedding_settings(parse("--mode", "windows", "--api-base", "http://127.0.0.1:9"))
    with pytest.raises(CliError, match="name two models"):
        embedding_settings(parse(*WRAPPED, "--mode", "windows", "--model", minilm_path()))


def test_the_key_comes_from_the_environment_and_settings_name_no_key(monkeypatch):
    monkeypatch.setenv("POSFAIR_EMBEDDING_API_KEY", "key-from-env")
    settings = embedding_settings(parse(*WRAPPED, "--mode", "windows", "--tokenizer", minilm_path()))
    assert settings["embed_source"]["kind"] == "openai-like" and "key-from-env" not in repr(settings)
    model = build_wrapped(settings["embed_source"])
    assert type(model).__name__ == "OpenAILikeEmbedding" and model.api_key == "key-from-env"
    assert model.api_base == "http://127.0.0.1:9" and model.model_name == "served-model"
