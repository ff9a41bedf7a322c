"""The calibration config: validated once, hashable, and serialisable to a stable tag.

The tag is what a vector store records so that vectors made under different settings are never mixed.
"""

from __future__ import annotations

from typing import Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt, field_validator

from posfair_llamaindex.options import Variant
from posfair_llamaindex.tag import TAG_SCHEMA, fingerprint_of

IsolatedToken = Literal["first", "last"]
LayerChoice = Union[Literal["last"], StrictInt, StrictFloat, tuple[StrictInt, ...]]


class CalibrationConfig(BaseModel):
    """How document attention is calibrated (Michail et al. 2026, paper defaults).

    ``layers`` selects the calibrated layers: a float fraction in (0, 1] of the final layers
    (0.5 means the last ``max(1, n // 2)``), an int count of final layers, ``"last"``, or an
    explicit tuple of layer indices (negative indices count from the end).
    ``isolated_tokens`` lists which edge tokens of a passage keep their own attention mass instead of
    joining a basket; ``None`` means the pooling default (first-token pooling isolates the first token,
    last-token pooling the first and the last, mean pooling none). The pooling token is always isolated.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    variant: Variant = Field(default="cls_soft", description="What happens to the isolated tokens' own mass.")
    strength: float = Field(default=0.5, ge=0.0, le=1.0, description="Mix between plain (0) and fully calibrated (1).")
    basket_size: StrictInt = Field(default=128, ge=1, description="Content tokens per basket.")
    layers: LayerChoice = Field(default=0.5, description="Which layers are calibrated.")
    hard_weight: float = Field(default=0.3, ge=0.0, lt=1.0, description="Pooling-token mass under cls_hard.")
    isolated_tokens: Optional[tuple[IsolatedToken, ...]] = Field(
        default=None, description="Edge tokens kept out of the baskets; None = pooling default."
    )

    @field_validator("layers")
    @classmethod
    def _check_layers(cls, value: Any) -> Any:
        if isinstance(value, bool):
            raise ValueError("layers must be 'last', a count, a fraction or a tuple of indices, not a bool")
        if isinstance(value, int) and value < 1:
            raise ValueError(f"layers as a count must be >= 1, got {value}")
        if isinstance(value, float) and not 0.0 < value <= 1.0:
            raise ValueError(f"layers as a fraction must be in (0, 1], got {value}")
        if isinstance(value, tuple):
            if not value:
                raise ValueError("layers as a tuple of indices must not be empty")
            if len(set(value)) != len(value):
                raise ValueError(f"layers lists an index twice: {value}")
        return value

    @field_validator("isolated_tokens")
    @classmethod
    def _check_isolated(cls, value: Optional[tuple[str, ...]]) -> Optional[tuple[str, ...]]:
        if value is None:
            return None
        # order-free: ("last", "first") and ("first", "last") are the same setting and the same tag
        return tuple(sorted(set(value)))

    @property
    def is_plain(self) -> bool:
        """True when calibration cannot change anything (strength 0)."""
        return self.strength == 0.0

    def resolve_layers(self, num_layers: int) -> tuple[int, ...]:
        """The sorted, non-negative layer indices this config calibrates in a model of ``num_layers`` layers."""
        if num_layers < 1:
            raise ValueError(f"a model needs at least one layer, got num_layers={num_layers}")
        spec = self.layers
        if spec == "last":
            return (num_layers - 1,)
        if isinstance(spec, tuple):
            resolved = []
            for index in spec:
                if not -num_layers <= index < num_layers:
                    raise ValueError(f"layers index {index} is out of range for a model with {num_layers} layers")
                resolved.append(index % num_layers)
            if len(set(resolved)) != len(resolved):
                raise ValueError(f"layers {spec} name the same layer twice in a model with {num_layers} layers")
            return tuple(sorted(resolved))
        if isinstance(spec, int):
            if spec > num_layers:
                raise ValueError(f"layers={spec} asks for more layers than the model has ({num_layers})")
            count = spec
        else:
            count = max(1, int(num_layers * spec + 1e-9))
        return tuple(range(num_layers - count, num_layers))

    def tag(self) -> dict:
        """A JSON-safe dict that identifies this config; equal configs give equal tags."""
        data = self.model_dump(mode="json")
        if self.variant != "cls_hard":
            data.pop("hard_weight")  # unused, so it must not make two identical behaviours look different
        data["schema"] = TAG_SCHEMA
        return data

    def fingerprint(self) -> str:
        """A short stable hash of :meth:`tag`."""
        return fingerprint_of(self.tag())
