"""How a collection keeps a dense vector's floats: float32, float16, or int8 / binary quantized with rescoring.

:class:`VectorStorage` is the one choice a user makes (``tagged_vector_store(..., vector_storage="int8")``, or a
``VectorStorage(...)`` for the details). It becomes Qdrant collection config, so it holds the same on a server and
on Qdrant Edge:

* ``float32``: Qdrant's default, as every collection was stored before this option existed;
* ``float16``: ``VectorParams(datatype=FLOAT16)``, half the bytes, no quantization;
* ``int8``: ``VectorParams(on_disk=True, quantization_config=ScalarQuantization(INT8, always_ram=True))``: one byte
  per float in RAM, the float32 originals on disk, and every search rescored from them
  (``SearchParams(quantization=QuantizationSearchParams(rescore=True, oversampling=...))``);
* ``binary``: the same with ``BinaryQuantization``: one bit per float in RAM.

The type changes what a search reads, so it enters the collection's tag (``vector_storage``: int8 and binary;
float16 as the ``datatype`` the tag already records); ``oversampling`` and ``rescore`` only shape a query and stay
out of it, and ``on_disk`` only says where the originals live.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from qdrant_client.http import models as rest

from posfair_llamaindex.options import STORAGE_TYPES, StorageType

QUANTIZED_TYPES: tuple = ("int8", "binary")
# the tag key of quantized storage, {vector name: type}; float16 is recorded as the tag's ``datatype``
TAG_KEY = "vector_storage"
# How many candidates a quantized search gathers per result before rescoring them from the originals, unless the
# query or the VectorStorage says otherwise (benchmarks/bench_window_storage.py, docs/RESULTS.md).
DEFAULT_OVERSAMPLING = {"int8": 2.0, "binary": 8.0}
# What a windows multivector is stored as when the caller does not choose (benchmarks/bench_window_storage.py).
DEFAULT_WINDOWS_STORAGE: StorageType = "int8"


class VectorStorage(BaseModel):
    """How a dense vector is stored: ``type`` and, for int8 and binary, how a search reads the quantized copy.

    ``oversampling``: candidates per result fetched by the quantized copy and rescored (default
    :data:`DEFAULT_OVERSAMPLING`); ``rescore``: rescore them from the originals (default True); ``on_disk``: keep
    the originals on disk and only the quantized copy in RAM (default True for int8 and binary, False otherwise).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    type: StorageType = "float32"
    oversampling: Optional[float] = Field(default=None, ge=1.0)
    rescore: Optional[bool] = None
    on_disk: Optional[bool] = None

    @model_validator(mode="after")
    def _quantized_only(self) -> VectorStorage:
        if not self.quantized:
            given = [name for name in ("oversampling", "rescore") if getattr(self, name) is not None]
            if given:
                raise ValueError(
                    f"{' and '.join(given)} shape(s) the search of a quantized copy, which type={self.type!r} does "
                    f"not have: use type 'int8' or 'binary', or leave {' and '.join(given)} unset"
                )
        return self

    @property
    def quantized(self) -> bool:
        return self.type in QUANTIZED_TYPES

    @property
    def originals_on_disk(self) -> bool:
        return self.quantized if self.on_disk is None else self.on_disk

    @property
    def search_oversampling(self) -> Optional[float]:
        if not self.quantized:
            return None
        return DEFAULT_OVERSAMPLING[self.type] if self.oversampling is None else self.oversampling

    def quantization_config(self) -> Any:
        """The quantization Qdrant keeps in RAM beside the originals, or None."""
        if self.type == "int8":
            return rest.ScalarQuantization(
                scalar=rest.ScalarQuantizationConfig(type=rest.ScalarType.INT8, always_ram=True)
            )
        if self.type == "binary":
            return rest.BinaryQuantization(binary=rest.BinaryQuantizationConfig(always_ram=True))
        return None

    def apply(self, params: rest.VectorParams, name: str = "") -> rest.VectorParams:
        """``params`` stored this way: datatype, quantization and on_disk set (refused where ``params`` already
        sets them otherwise: the choice is made once)."""
        clashes = []
        if params.quantization_config is not None and (self.quantized or self.type == "float16"):
            clashes.append("quantization_config")
        wanted_datatype = rest.Datatype.FLOAT16 if self.type == "float16" else None
        if params.datatype not in (None, rest.Datatype.FLOAT32, wanted_datatype):
            clashes.append(f"datatype={params.datatype.value}")
        if self.on_disk is not None and params.on_disk is not None and params.on_disk != self.on_disk:
            clashes.append(f"on_disk={params.on_disk}")
        if clashes:
            where = f"vector {name!r}" if name else "the vector"
            raise ValueError(
                f"dense_config sets {', '.join(clashes)} for {where}, and vector_storage={self.type!r} decides "
                "the same: give the storage in one place (vector_storage, or dense_config alone)"
            )
        update: dict[str, Any] = {}
        if self.type == "float16":
            update["datatype"] = rest.Datatype.FLOAT16
        if self.quantized:
            update["quantization_config"] = self.quantization_config()
        on_disk = params.on_disk if params.on_disk is not None else (True if self.originals_on_disk else None)
        if on_disk is not None:
            update["on_disk"] = on_disk
        return params.model_copy(update=update, deep=True)

    def search_params(self, params: Optional[rest.SearchParams]) -> Optional[rest.SearchParams]:
        """``params`` with the quantized search (rescore, oversampling) added where the caller set none."""
        if not self.quantized or (params is not None and (params.quantization is not None or params.exact)):
            return params
        quantization = rest.QuantizationSearchParams(
            rescore=True if self.rescore is None else self.rescore, oversampling=self.search_oversampling
        )
        if params is None:
            return rest.SearchParams(quantization=quantization)
        return params.model_copy(update={"quantization": quantization})


StorageChoice = Union[VectorStorage, str, Mapping[str, Union[VectorStorage, str]], None]


def as_storage(value: Any, what: str = "vector_storage") -> VectorStorage:
    """A :class:`VectorStorage` from itself, its type's name, or its fields as a dict."""
    if isinstance(value, VectorStorage):
        return value
    try:
        if isinstance(value, str):
            return VectorStorage(type=value)
        if isinstance(value, Mapping):
            return VectorStorage.model_validate(dict(value))
    except ValidationError as error:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'value'}: {e['msg']}" for e in error.errors())
        raise ValueError(f"invalid {what} {value!r}: {problems} (types: {', '.join(STORAGE_TYPES)})") from None
    raise TypeError(f"{what} must be one of {STORAGE_TYPES}, a VectorStorage or a dict of its fields, got {value!r}")


def storage_by_name(choice: StorageChoice, names: tuple) -> Optional[dict[str, VectorStorage]]:
    """``{vector name: VectorStorage}`` for every dense vector, or None when the caller chose nothing.

    One choice applies to every dense vector; a dict keyed by vector name (every one of ``names``) sets each.
    """
    if choice is None:
        return None
    if isinstance(choice, Mapping) and set(choice) <= set(names) and set(choice) and not _is_fields(choice):
        if set(choice) != set(names):
            raise ValueError(
                f"vector_storage by name must name exactly this collection's dense vectors {list(names)}, got "
                f"{sorted(choice)}"
            )
        return {name: as_storage(choice[name], f"vector_storage[{name!r}]") for name in names}
    storage = as_storage(choice)
    return {name: storage for name in names}


def _is_fields(choice: Mapping) -> bool:
    return set(choice) <= set(VectorStorage.model_fields)


def stored_types(tag: Optional[Mapping[str, Any]], names: tuple) -> dict[str, StorageType]:
    """The storage type of each dense vector as a collection's tag records it (float32 where it records none)."""
    tag = tag or {}
    quantized = tag.get(TAG_KEY) or {}
    datatypes = tag.get("datatype") or {}
    found: dict[str, StorageType] = {}
    for name in names:
        if quantized.get(name) in QUANTIZED_TYPES:
            found[name] = quantized[name]
        elif datatypes.get(name) == rest.Datatype.FLOAT16.value:
            found[name] = "float16"
        else:
            found[name] = "float32"
    return found


def restore_collection(vectors: Any, tag: Mapping[str, Any], choice: StorageChoice) -> tuple[Any, dict[str, Any]]:
    """A collection's dense ``vectors`` config and posfair ``tag`` with every dense vector stored as ``choice``:
    what ``posfair migrate --vector-storage`` creates the copy with. The vectors' values are the same; only how
    they are kept, and the tag's record of it (``vector_storage``, a float16 ``datatype``), change."""
    named = dict(vectors) if isinstance(vectors, Mapping) else {"": vectors}
    chosen = storage_by_name(choice, tuple(named))
    assert chosen is not None
    params: dict[str, Any] = {}
    for name, old in named.items():
        plain = old.model_copy(update={"quantization_config": None, "on_disk": None}, deep=True)
        if plain.datatype == rest.Datatype.FLOAT16:
            plain = plain.model_copy(update={"datatype": None})
        params[name] = chosen[name].apply(plain, name)
    new_tag = {key: value for key, value in tag.items() if key != TAG_KEY}
    datatypes = {n: t for n, t in (tag.get("datatype") or {}).items() if t != rest.Datatype.FLOAT16.value}
    datatypes.update({n: "float16" for n, s in chosen.items() if s.type == "float16"})
    new_tag.pop("datatype", None)
    if datatypes:
        new_tag["datatype"] = dict(sorted(datatypes.items()))
    quantized = {n: s.type for n, s in chosen.items() if s.quantized}
    if quantized:
        new_tag[TAG_KEY] = quantized
    return (params if isinstance(vectors, Mapping) else params[""]), new_tag
