"""Prompts in front of a text: how long they are in tokens, and which of their tokens are [DUMP] tokens.

A model fine-tuned with trainable prefix tokens (``posfair finetune --dump-tokens K``) has the special
tokens ``[DUMP0]`` .. ``[DUMP{K-1}]`` in its tokenizer and uses their concatenation as its query and
document prompt. The encoder needs two numbers for such a prompt: its length as sentence-transformers
counts it (to leave it out of mean pooling when the folder says ``include_prompt: false``), and how many
[DUMP] tokens follow the first token (to keep them out of the calibration's baskets).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

MAX_DUMP_TOKENS = 16
DUMP_TOKEN = re.compile(r"^\[DUMP(\d+)\]$")


def dump_token_names(count: int) -> list[str]:
    """``["[DUMP0]", ...]``: the names fine-tuning gives its ``count`` prefix tokens."""
    if not isinstance(count, int) or not 0 <= count <= MAX_DUMP_TOKENS:
        raise ValueError(f"dump_tokens must be 0 (off) or 1..{MAX_DUMP_TOKENS}, got {count!r}")
    return [f"[DUMP{i}]" for i in range(count)]


def dump_token_ids(tokenizer: PreTrainedTokenizerBase) -> frozenset:
    """Ids of the tokenizer's added ``[DUMP<n>]`` tokens (empty for a model trained without them)."""
    return frozenset(i for token, i in tokenizer.get_added_vocab().items() if DUMP_TOKEN.match(token))


@dataclass(frozen=True)
class PromptSpan:
    """What a prompt occupies at the start of every tokenized text."""

    text: str
    length: int  # sentence-transformers' prompt length: its tokens with the leading special token, no trailing
    dump_tokens: int  # [DUMP] tokens right after the first token


NO_PROMPT = PromptSpan(text="", length=0, dump_tokens=0)


def prompt_span(tokenizer: PreTrainedTokenizerBase, prompt: str) -> PromptSpan:
    """Measure ``prompt`` the way sentence-transformers does, and find its [DUMP] run.

    sentence-transformers tokenizes the prompt alone, with special tokens, and drops a trailing special
    token from the count; that is the number of leading positions ``include_prompt: false`` leaves out.
    [DUMP] tokens anywhere but in one run right after the first token are refused: calibration isolates
    exactly that run.
    """
    if not prompt:
        return NO_PROMPT
    ids = list(tokenizer(prompt)["input_ids"])
    length = len(ids)
    if ids and ids[-1] in set(tokenizer.all_special_ids):
        length -= 1
    dumps = dump_token_ids(tokenizer)
    found = [position for position, i in enumerate(ids) if i in dumps]
    if found and found != list(range(1, 1 + len(found))):
        raise ValueError(
            f"prompt {prompt!r} puts its [DUMP] tokens at positions {found}; they must follow the first token "
            "as one run (positions 1..K), as posfair finetune writes them"
        )
    return PromptSpan(text=prompt, length=length, dump_tokens=len(found))
