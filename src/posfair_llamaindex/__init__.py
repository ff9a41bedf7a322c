"""Position-fair dense retrieval for LlamaIndex: attention calibration at indexing time."""

from posfair_llamaindex.attention import ATTENTION_NAME, CalibrationPlan, posfair_attention
from posfair_llamaindex.calibration import RowLayout, calibrate_rows
from posfair_llamaindex.config import CalibrationConfig
from posfair_llamaindex.embedding import PosFairEmbedding
from posfair_llamaindex.encoder import PosFairEncoder, UnsupportedModelError
from posfair_llamaindex.version import __version__

__all__ = [
    "ATTENTION_NAME",
    "CalibrationConfig",
    "CalibrationPlan",
    "PosFairEmbedding",
    "PosFairEncoder",
    "RowLayout",
    "UnsupportedModelError",
    "__version__",
    "calibrate_rows",
    "posfair_attention",
]
