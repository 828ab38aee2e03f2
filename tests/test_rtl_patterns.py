"""Every app through Verilator: bit-exact with the golden model, cycles as predicted,
deterministic and lint-clean Verilog."""

import pytest
from conftest import PATTERNS, load_pattern

from hwgen_sim import runner

pytestmark = pytest.mark.rtl


@pytest.mark.parametrize("name", PATTERNS)
def test_pattern_in_verilator(name):
    app = load_pattern(name)
    kernel = getattr(app, name)
    r = kernel.verify(*app.inputs(0))
    assert r.cycles == r.predicted_cycles
    assert r.roofline_cycles <= r.cycles


@pytest.mark.parametrize("name", PATTERNS)
def test_build_is_deterministic_and_lint_clean(name, tmp_path):
    kernel = getattr(load_pattern(name), name)
    first = kernel.build(out_dir=tmp_path / "a")
    second = kernel.build(out_dir=tmp_path / "b")
    a = open(first.paths["verilog"], "rb").read()
    assert a == open(second.paths["verilog"], "rb").read()
    ra, rb = dict(first.report), dict(second.report)
    for timing in ("build_seconds", "pass_seconds"):  # wall-clock times
        ra.pop(timing), rb.pop(timing)
    assert ra == rb
    warnings = runner.lint(first.paths["verilog"], first.paths["waivers"])
    assert "%Warning" not in warnings and "%Error" not in warnings, warnings
