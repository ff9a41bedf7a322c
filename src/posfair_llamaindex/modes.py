"""The document modes as one type: what each mode stores, how its document embedding is laid out, what its
tag records, which settings it takes and what it fills in once the model's pooling is known, so that a new mode
is one entry in :data:`MODES_BY_NAME` rather than a check in every module.

A *document kind* is the whole-document part of an embedding (``plain``, ``calibrated``, ``dual``, or ``none``);
a mode fixes its kind, except windows mode, whose settings choose it (``WindowConfig.document``). Knows nothing
about models, LlamaIndex or Qdrant: the store turns the vector names below into a collection.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from posfair_llamaindex.options import MODES, WINDOW_DOCUMENTS

# the named dense vectors of a collection (a single-vector collection keeps LlamaIndex's unnamed vector)
PLAIN_VECTOR = "plain"
CALIBRATED_VECTOR = "calibrated"
DUAL_VECTORS = (PLAIN_VECTOR, CALIBRATED_VECTOR)
WINDOWS_VECTOR = "windows"


# Dual mode's defaults per pooling, picked from SQuAD-LongPosQ and SciFact together (docs/RESULTS.md, dual
# section): the strength of the calibrated vector and the rule that fuses its score with the plain one.
# First and last: max at 1.0 (§3.1, the fairest and best HM, SciFact within noise); mean: max at 0.85 (§3.4).
DUAL_DEFAULTS: dict[str, dict[str, Any]] = {
    "first": {"strength": 1.0, "fusion": "max"},
    "last": {"strength": 1.0, "fusion": "max"},
    "mean": {"strength": 0.85, "fusion": "max"},
}
# Windows mode's rule for fusing the document vector(s) with the best window (docs/RESULTS.md §4)
WINDOWS_FUSION = "max"


# a vector store class that sets this class attribute to True holds every mode's document embedding (the posfair
# Qdrant store); any other store is given single-vector modes only (embedding.py refuses the rest up front)
HOLDS_EVERY_MODE = "holds_every_posfair_mode"


@dataclass(frozen=True)
class DocumentKind:
    """The whole-document vector(s) that lead a document embedding."""

    name: str
    vectors: tuple[str, ...]  # their names, in the order they are laid out (a dimension each)
    calibrated: bool  # some vector is calibrated, so the calibration config is part of what they mean

    @property
    def count(self) -> int:
        return len(self.vectors)


DOCUMENT_KINDS: dict[str, DocumentKind] = {
    "plain": DocumentKind("plain", (PLAIN_VECTOR,), calibrated=False),
    "calibrated": DocumentKind("calibrated", (CALIBRATED_VECTOR,), calibrated=True),
    "dual": DocumentKind("dual", DUAL_VECTORS, calibrated=True),
    "none": DocumentKind("none", (), calibrated=False),
    "sea": DocumentKind("sea", ("sea",), calibrated=False),  # the mean of plain chunk vectors, stored unnamed
}


@dataclass(frozen=True)
class ModeDefaults:
    """What a mode fills in once the model's pooling is known; None leaves the setting as it was given."""

    strength: Optional[float] = None  # the calibrated vector's strength, where no calibration was given
    fusion: Optional[str] = None  # the fusion rule, where none was given


@dataclass(frozen=True)
class DocumentMode:
    """One mode, as every layer sees it."""

    name: str
    summary: str  # one line for help texts: how a document is encoded
    document: Optional[str]  # the document kind, or None where the mode's settings choose it (windows)
    settings: Optional[str] = None  # the PosFairEmbedding field holding the mode's own settings, if any
    fused: bool = False  # a document has several scores, fused at query time by a rule (``fusion``)
    windows: bool = False  # a MaxSim multivector of windows follows the document vectors; long texts are whole
    named_vectors: bool = False  # a collection names its vectors (several per point) instead of one unnamed one
    upgradable: bool = False  # ``posfair upgrade`` can turn a plain LlamaIndex collection into this mode

    def document_kind(self, window_document: Optional[str] = None) -> DocumentKind:
        """The whole-document part of this mode's embedding (``window_document``: windows mode's choice)."""
        if self.document is not None:
            return DOCUMENT_KINDS[self.document]
        if window_document not in DOCUMENT_KINDS:
            raise ValueError(f"mode {self.name!r} needs its document vector: one of {list(WINDOW_DOCUMENTS)}")
        return DOCUMENT_KINDS[window_document]

    def collection_vectors(self, window_document: Optional[str] = None) -> tuple[str, ...]:
        """The named dense vectors a collection of this mode stores; ``()`` for one unnamed vector."""
        if not self.named_vectors:
            return ()
        kind = self.document_kind(window_document)
        return (*kind.vectors, WINDOWS_VECTOR) if self.windows else kind.vectors

    def vectors_per_document(self, window_document: Optional[str] = None) -> str:
        """What a document embedding of this mode holds, in words (for errors that name the mode)."""
        kind = self.document_kind(window_document)
        whole = " and ".join(f"a {name} vector" for name in kind.vectors) if self.named_vectors else "one vector"
        if self.windows:
            return f"a vector per window of the text{' beside ' + whole if kind.count else ''}"
        return whole

    def check_settings(self, chunker: Any = None, windows: Any = None, fusion: Optional[str] = None) -> None:
        """Refuses the mode-specific settings this mode does not take: the chunker and the windows belong to the
        mode they are named for, the fusion rule to the fused modes."""
        for setting, value in (("chunker", chunker), ("windows", windows)):
            if value is not None and self.settings != setting:
                owner = next(mode.name for mode in MODES_BY_NAME.values() if mode.settings == setting)
                raise ValueError(f"{setting} settings are only used by mode {owner!r}, not {self.name!r}")
        if fusion is not None and not self.fused:
            raise ValueError(
                f"fusion is only used by modes {' and '.join(map(repr, fused_modes()))}, not {self.name!r}"
            )

    def defaults(self, pooling: Optional[str], window_document: Optional[str] = None) -> ModeDefaults:
        """The strength and fusion this mode takes, where none were given, for a model that pools by ``pooling``:
        a dual document's from :data:`DUAL_DEFAULTS`, except that windows mode fuses by :data:`WINDOWS_FUSION`."""
        dual = DUAL_DEFAULTS[pooling] if self.document_kind(window_document).name == "dual" else None
        if self.windows:
            fusion = WINDOWS_FUSION
        else:
            fusion = dual["fusion"] if dual is not None else None
        return ModeDefaults(strength=dual["strength"] if dual is not None else None, fusion=fusion)

    def check_strength(self, strength: float, window_document: Optional[str] = None) -> None:
        """Refuses strength 0 for a dual document, whose calibrated half would then be the plain vector again."""
        if self.document_kind(window_document).name == "dual" and strength == 0.0:
            raise ValueError(
                f"mode {self.name!r} with a dual document needs a calibrated half: strength 0 would store the "
                "plain vector twice"
            )

    def tag_keys(self) -> tuple[str, ...]:
        """The settings beyond model, pooling and length that this mode's tag records."""
        keys = ["calibration"] if self.document is None or DOCUMENT_KINDS[self.document].calibrated else []
        if self.settings is not None:
            keys.append(self.settings)
        if self.fused:
            keys.append("fusion")
        return tuple(keys)

    def describe(self, tag: dict[str, Any]) -> str:
        """The settings a stored tag records for this mode, in one line (``posfair collections``)."""
        parts = [f"mode {self.name}"]
        calibration = tag.get("calibration")
        if calibration:
            parts.append(
                "strength {strength}, {variant}, layers {layers}, baskets of {basket_size}".format(
                    strength=calibration.get("strength"),
                    variant=calibration.get("variant"),
                    layers=describe_layers(calibration.get("layers")),
                    basket_size=calibration.get("basket_size"),
                )
            )
        if self.settings == "chunker" and tag.get("chunker"):
            chunker = tag["chunker"]
            parts.append(f"chunker {chunker.get('kind')} of {chunker.get('chunk_size')} tokens")
        if self.windows and tag.get("windows"):
            windows = tag["windows"]
            parts.append(
                f"windows of {windows.get('size')} tokens every {windows.get('stride')}, "
                f"document vector {windows.get('document')}"
            )
        if self.fused and tag.get("fusion"):
            parts.append(f"fusion {tag['fusion']}")
        return ", ".join(parts)


def describe_layers(layers: Any) -> str:
    if isinstance(layers, (list, tuple)):
        return ",".join(str(layer) for layer in layers)
    return str(layers)


MODES_BY_NAME: dict[str, DocumentMode] = {
    mode.name: mode
    for mode in (
        DocumentMode("calibrated", "one calibrated vector per document", document="calibrated", upgradable=True),
        DocumentMode("plain", "the unmodified model, for comparison", document="plain"),
        DocumentMode(
            "sea", "chunked with chonkie, chunks embedded plain and averaged", document="sea", settings="chunker"
        ),
        DocumentMode(
            "dual",
            "a plain and a calibrated vector from one pass, fused at query time",
            document="dual",
            fused=True,
            named_vectors=True,
            upgradable=True,
        ),
        DocumentMode(
            "windows",
            "a plain vector per window of the whole text (MaxSim), beside an optional document vector",
            document=None,
            settings="windows",
            fused=True,
            windows=True,
            named_vectors=True,
            upgradable=True,
        ),
    )
}
assert tuple(MODES_BY_NAME) == MODES, "options.MODES and the modes here name the same modes, in the same order"


def document_mode(name: str) -> DocumentMode:
    """The mode called ``name``; an unknown name is refused with the list of modes."""
    try:
        return MODES_BY_NAME[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown mode {name!r}: expected one of {list(MODES_BY_NAME)}") from None


def fused_modes() -> tuple[str, ...]:
    """The modes that take a fusion rule."""
    return tuple(name for name, mode in MODES_BY_NAME.items() if mode.fused)
