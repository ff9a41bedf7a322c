"""How a ``PosFairEmbedding`` crosses a process boundary: as its settings, never as its weights.

LlamaIndex's ``IngestionPipeline(num_workers=...)`` and Ray actors pickle the embedding. The receiving process
loads the encoder on first use, once, and refuses to embed when the model it finds gives another fingerprint
than the sender's. LlamaIndex's own ``BaseComponent`` pickling would trial-pickle the whole model to find out
that it cannot, drop it with a warning, and rebuild the embedding eagerly while the task is still being
unpickled, where a failure kills the pool worker instead of reaching the caller.
"""

from __future__ import annotations

import os
from typing import Any

from llama_index.core.callbacks import CallbackManager


class PicklesAsSettings:
    """The pickling protocol of :class:`~posfair_llamaindex.embedding.PosFairEmbedding` (a mixin in front of
    pydantic's ``BaseModel``, which holds the fields and the private ``_unpickled`` record)."""

    def __getstate__(self) -> dict[str, Any]:
        from pydantic import BaseModel

        private = object.__getattribute__(self, "__pydantic_private__") or {}
        if getattr(private.get("_encoder"), "is_wrapped", False):
            raise TypeError(
                "PosFairEmbedding(embed_model=...) is not sent to other processes: the wrapped LlamaIndex embedding "
                "holds clients or a model of its own. Run IngestionPipeline without num_workers (its requests already "
                "run concurrently on the async path: pipeline.arun)"
            )
        if private.get("_unpickled") is not None and "_encoder" not in private:
            origin = private["_unpickled"]  # received and never used: passed on as received, nothing loads
        else:
            origin = {"fingerprint": self.fingerprint(), "padding_side": self._encoder.padding_side}
        state = BaseModel.__getstate__(self)
        # event handlers stay with the process that registered them
        fields = {**state["__dict__"], "callback_manager": CallbackManager([])}
        return {**state, "__dict__": fields, "__pydantic_private__": {"_unpickled": origin}}

    def __setstate__(self, state: dict[str, Any]) -> None:
        from pydantic import BaseModel

        BaseModel.__setstate__(self, state)  # fields only; the encoder loads on first use (_load_unpickled)

    def __getattr__(self, name: str) -> Any:
        if name in ("_encoder", "_sea", "_windows"):
            private = object.__getattribute__(self, "__pydantic_private__")
            if private and name not in private and private.get("_unpickled") is not None:
                self._load_unpickled()
                return private[name]
        return super().__getattr__(name)

    def _load_unpickled(self) -> None:
        private = object.__getattribute__(self, "__pydantic_private__")
        origin = private["_unpickled"]
        try:
            encoder = self.load_config.encoder(self.model_name, padding_side=origin["padding_side"])
            loaded = type(self)(**self.constructor_settings(), encoder=encoder)
        except Exception as error:
            raise RuntimeError(
                f"{type(self).__name__} could not load {self.model_name} in process {os.getpid()}, where it was sent "
                f"pickled (a worker of IngestionPipeline(num_workers=...) or a Ray actor): "
                f"{type(error).__name__}: {error}"
            ) from error
        if loaded.fingerprint() != origin["fingerprint"]:
            raise ValueError(
                f"PosFairEmbedding: {self.model_name} in process {os.getpid()} gives fingerprint "
                f"{loaded.fingerprint()}, but the embedding was sent with fingerprint {origin['fingerprint']}: the "
                "two processes see different weights or settings, so their vectors would not be comparable"
            )
        private["_encoder"], private["_sea"], private["_windows"] = loaded._encoder, loaded._sea, loaded._windows
        private["_unpickled"] = None
