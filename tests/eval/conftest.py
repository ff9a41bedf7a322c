"""Fixtures of the evaluation tests: the generated stand-in for the shared data, and MiniLM's tokenizer."""

from __future__ import annotations

import pytest
from transformers import AutoTokenizer

from tests.eval.fake_data import write_fake_shared_data
from tests.utils import minilm_path


@pytest.fixture(scope="session")
def fake_data(tmp_path_factory):
    """A generated data folder with the shared data's layout (squad, nq-open-oracle, beir-scifact)."""
    return write_fake_shared_data(tmp_path_factory.mktemp("fake-shared-data"))


@pytest.fixture(scope="session")
def tokenizer():
    return AutoTokenizer.from_pretrained(minilm_path())
