"""Turning texts into vectors: the encoder (plain, calibrated, dual), SEA and windows, over a loaded model."""
