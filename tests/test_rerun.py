"""A kernel runs again without a reset: the second run's results and cycles are those of the
first. Data registers (pipeline values, register memories, RAM addresses, transfer queues) have
no reset (it would tie tens of thousands of flip-flops to one net); only control state does, and
each run must start from whatever the last one left in the data path."""

import pytest
from conftest import load_pattern

import hwgen as hw

pytestmark = pytest.mark.rtl


@pytest.mark.parametrize("name", ["kmeans", "gemm", "tpchq1", "outliers", "gda"])
def test_second_run_without_reset_matches_the_golden_model(name):
    app = load_pattern(name)
    kernel = getattr(app, name)
    r = kernel.verify(*app.inputs(0), runs=2)
    assert r.cycles == r.predicted_cycles


def test_runs_must_be_a_positive_integer():
    app = load_pattern("dotproduct")
    for bad in (0, -1, 1.5, True):
        with pytest.raises(hw.HwgenError, match="runs must be a positive integer"):
            app.dotproduct.verify(*app.inputs(0), runs=bad)
