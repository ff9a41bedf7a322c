"""The settings the sweeps walk through (the paper's Figure 4 strengths and Table 1 grid)."""

STRENGTHS = tuple(round(0.05 * i, 2) for i in range(1, 21))
GRID_LAYERS = ("last", 0.25, 0.5, 1.0)
GRID_BASKETS = (64, 128, 256)
