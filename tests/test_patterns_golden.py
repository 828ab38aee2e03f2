"""The golden model (the IR interpreter) agrees with each app's independent numpy reference."""

import numpy as np
import pytest
from conftest import PATTERNS, load_pattern


@pytest.mark.parametrize("name", PATTERNS)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_golden_model_matches_reference(name, seed):
    app = load_pattern(name)
    kernel = getattr(app, name)
    args = app.inputs(seed)
    got = kernel(*args)
    want = app.reference(*args)
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    assert len(got) == len(want)
    tolerance = getattr(app, "TOLERANCE", 0)  # fixed-point apps against float64 references
    for g, w in zip(got, want):
        assert np.asarray(g).dtype == np.asarray(w).dtype
        if tolerance:
            np.testing.assert_allclose(g, w, rtol=0, atol=tolerance)
        else:
            np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("name", PATTERNS)
def test_each_pattern_defines_kernel_inputs_reference(name):
    app = load_pattern(name)
    assert hasattr(app, name) and hasattr(app, "inputs") and hasattr(app, "reference")
