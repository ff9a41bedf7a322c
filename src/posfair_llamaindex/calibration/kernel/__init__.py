"""The compiled all-rows kernel (``csrc/basket_pieces.cpp``) and the cache that builds and loads it."""
