"""How a model is loaded and run, as one frozen value that every caller hands down.

An embedding, an evaluation, an audit and an upgrade each load a model the same way (pooling, token limit,
device, precision, whether its own code may run, how many texts go through at once). Passing these as one
value, instead of as the same six keywords through every signature, keeps the callers from drifting apart and
lets a new setting be added in one place.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Optional, Union

from pydantic import BaseModel, ConfigDict, Field

from posfair_llamaindex.options import DEFAULT_BATCH_TOKENS, DType, LengthLimit, PaddingSide, Pooling

if TYPE_CHECKING:  # building the value must not load torch
    from posfair_llamaindex.encoding.encoder import PosFairEncoder

DEFAULT_BATCH_SIZE = 16


class LoadConfig(BaseModel):
    """``pooling``: detected from the model's sentence-transformers files when None. ``max_length``: tokens per
    text, ``"model_card"`` or ``"positions"`` (None: ``options.DEFAULT_LENGTH_LIMIT``). ``device``: CUDA when
    available if None. ``dtype``: the model's precision. ``trust_remote_code``: run the model folder's own code.
    ``batch_size``: texts per call of the embedding (LlamaIndex's ``embed_batch_size``). ``max_batch_tokens``: padded
    tokens per forward pass."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    pooling: Optional[Pooling] = None
    max_length: Optional[Union[Annotated[int, Field(ge=2)], LengthLimit]] = None
    device: Optional[str] = None
    dtype: Optional[DType] = None
    trust_remote_code: bool = False
    batch_size: int = Field(default=DEFAULT_BATCH_SIZE, ge=1)
    max_batch_tokens: int = Field(default=DEFAULT_BATCH_TOKENS, ge=1)

    def encoder(self, model_name: str, *, padding_side: PaddingSide = "right") -> PosFairEncoder:
        """A freshly loaded encoder under these settings."""
        from posfair_llamaindex.encoding.encoder import PosFairEncoder

        return PosFairEncoder(model_name, padding_side=padding_side, **self.encoder_arguments())

    def encoder_arguments(self) -> dict[str, Any]:
        """``PosFairEncoder``'s keywords for these settings (JSON-safe: what a query's process is sent)."""
        return {
            "pooling": self.pooling,
            "max_length": self.max_length,
            "device": self.device,
            "dtype": self.dtype,
            "trust_remote_code": self.trust_remote_code,
        }

    def embedding_arguments(self) -> dict[str, Any]:
        """The same settings as ``PosFairEmbedding``'s keyword arguments (it keeps LlamaIndex's flat names)."""
        return {
            **self.encoder_arguments(),
            "embed_batch_size": self.batch_size,
            "max_batch_tokens": self.max_batch_tokens,
        }

    def with_pooling(self, pooling: Optional[str]) -> LoadConfig:
        return self if pooling == self.pooling else self.model_copy(update={"pooling": pooling})


# the settings a caller gets when it names none (frozen, so one value serves every default)
DEFAULT_LOAD = LoadConfig()
