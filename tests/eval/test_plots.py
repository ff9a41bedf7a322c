"""Charts are matplotlib Figures built without pyplot, and they draw what they are given."""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from posfair_llamaindex.eval import plots


def test_self_mass_marks_the_calibrated_layers(tmp_path):
    plain = np.random.default_rng(0).uniform(0, 1, size=(4, 20))
    figure = plots.self_mass(plain, plain * 0.5, calibrated_layers=[2, 3])
    assert isinstance(figure, Figure)
    axis = figure.axes[0]
    assert [t.get_text() for t in axis.get_xticklabels()] == ["0", "1", "2*", "3*"]
    path = plots.save_png(figure, tmp_path / "nested" / "self_mass.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 5000


def test_segment_profiles_draw_one_line_per_profile(tmp_path):
    profile = np.linspace(0.9, 0.8, 10)[None, :].repeat(3, axis=0)
    figure = plots.segment_profiles([("plain", profile), ("calibrated", profile + 0.01)])
    lines = figure.axes[0].get_lines()
    assert [line.get_label() for line in lines] == ["plain", "calibrated"]
    np.testing.assert_allclose(lines[0].get_ydata(), profile.mean(axis=0))
    np.testing.assert_allclose(lines[1].get_ydata(), profile.mean(axis=0) + 0.01)
