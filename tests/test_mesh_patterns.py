"""The mesh apps in patterns/mesh/ (one per collective): the golden model equals each app's
plain-numpy reference, and the hardware equals the golden model bit for bit, in the
predicted cycles."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

APPS = sorted(p.stem for p in (Path(__file__).resolve().parent.parent / "patterns" / "mesh").glob("*.py"))


def load(name):
    path = Path(__file__).resolve().parent.parent / "patterns" / "mesh" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"mesh_pattern_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, getattr(module, name)


def test_one_app_per_collective():
    assert APPS == ["all_gather", "all_to_all", "allreduce", "ppermute", "reduce_scatter"]


@pytest.mark.parametrize("name", APPS)
def test_golden_model_equals_the_numpy_reference(name):
    app, kernel = load(name)
    for seed in (0, 1):
        args = app.inputs(seed)
        got, want = kernel(*args), app.reference(*args)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)


@pytest.mark.rtl
@pytest.mark.parametrize("name", APPS)
def test_hardware_equals_the_golden_model_in_the_predicted_cycles(name):
    app, kernel = load(name)
    sim = kernel.verify(*app.inputs(0))
    np.testing.assert_array_equal(sim.outputs, app.reference(*app.inputs(0)))
    assert sim.cycles == sim.predicted_cycles
