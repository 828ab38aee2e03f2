"""Programs the hardware once got wrong, through Verilator: bit-exact with the golden model."""

import numpy as np
import pytest

from test_lower import mlp, mlp_args, mlp_numpy

pytestmark = pytest.mark.rtl


@pytest.mark.parametrize("schedule", [
    dict(metapipeline=False),  # the untiled baseline
    dict(tile={"n": 4, "o": 4, "i": 4}, par={"i": 2}),
])
def test_helper_called_twice_in_verilator(schedule):
    kernel = mlp(2).with_schedule(**schedule)
    x, w = mlp_args(2)
    r = kernel.verify(x, w)
    np.testing.assert_array_equal(r.outputs, mlp_numpy(x, w))
