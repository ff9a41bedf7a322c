"""The method itself: the calibration config, the row math on attention weights, and the all-rows basket attention.

Nothing here knows about models, LlamaIndex or Qdrant. ``kernel/`` holds the compiled all-rows kernel and the
cache that builds it once per machine.
"""
