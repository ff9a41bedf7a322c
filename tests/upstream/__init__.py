"""Helpers for running other projects' test suites against this package (their tests are never copied here)."""
