"""The mesh apps in patterns/mesh/ (one per collective, collective matmul, sharded gemms, a
halo-exchange stencil, a pipelined MLP, a training step that uses three, and a fixed-point
logistic-regression step written for whole arrays):
the golden model equals each app's plain-numpy reference, and the hardware equals the golden
model bit for bit, in the predicted cycles."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

import hwgen as hw

APPS = sorted(p.stem for p in (Path(__file__).resolve().parent.parent / "patterns" / "mesh").glob("*.py"))


def load(name):
    path = Path(__file__).resolve().parent.parent / "patterns" / "mesh" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"mesh_pattern_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, getattr(module, name)


def test_one_app_per_collective():
    assert APPS == [
        "all_gather",
        "all_to_all",
        "allreduce",
        "collective_matmul",
        "halo_stencil",
        "logreg_step",
        "pipeline_mlp",
        "ppermute",
        "reduce_scatter",
        "sharded_gemm",
        "weight_update",
    ]


@pytest.mark.parametrize("name", APPS)
def test_golden_model_equals_the_numpy_reference(name):
    app, kernel = load(name)
    for seed in (0, 1):
        args = app.inputs(seed)
        got, want = kernel(*args), app.reference(*args)
        assert got.dtype == want.dtype and got.shape == want.shape
        close(app, got, want)


def close(app, got, want):
    """Equal, or within the app's TOLERANCE (fixed-point apps against float64 references)."""
    tolerance = getattr(app, "TOLERANCE", 0)
    if tolerance:
        np.testing.assert_allclose(got, want, rtol=0, atol=tolerance)
    else:
        np.testing.assert_array_equal(got, want)


@pytest.mark.rtl
@pytest.mark.parametrize("name", APPS)
def test_hardware_equals_the_golden_model_in_the_predicted_cycles(name):
    app, kernel = load(name)
    sim = kernel.verify(*app.inputs(0))  # bit-exact against the golden model
    close(app, sim.outputs, app.reference(*app.inputs(0)))
    assert sim.cycles == sim.predicted_cycles


@pytest.mark.rtl
def test_weight_update_sharded_or_replicated_gives_the_same_weights():
    """The training step with its update sharded (all-gather, reduce-scatter, all-gather) and
    replicated (all-reduce): the same weights, each in its predicted cycles."""
    app, sharded = load("weight_update")
    args = app.inputs(1)
    want = app.reference(*args)
    np.testing.assert_array_equal(app.replicated(*args), want)
    for kernel, kinds in ((sharded, ["all_gather", "reduce_scatter", "all_gather"]), (app.replicated, ["all_reduce"])):
        sim = kernel.verify(*args)
        np.testing.assert_array_equal(sim.outputs, want)
        assert sim.cycles == sim.predicted_cycles
        assert [c["kind"] for c in sim.design.report["collectives"]] == kinds


def test_the_training_step_builds_for_other_model_sizes():
    """`kernels(features)` (the benchmark's larger models): every kernel's golden model equals
    numpy at 128 weights, and the kernels read arrays of that size."""
    app, _ = load("weight_update")
    args = app.inputs(3, 128)
    want = app.reference(*args)
    for kernel in app.kernels(128).values():
        np.testing.assert_array_equal(kernel(*args), want)
    with pytest.raises(hw.HwgenError, match=r"expected an int32 array of shape \(128, 128\)"):
        app.kernels(128)["replicated"](*app.inputs(3))


@pytest.mark.rtl
def test_the_global_step_picks_its_update_from_the_weights_sharding():
    """The training step written for whole arrays: weights placed in quarters give the
    sharded update (all-gather, reduce-scatter, a quarter updated on each PE), replicated
    weights the replicated one (all-reduce); the same weights as numpy either way."""
    app, _ = load("weight_update")
    args = app.inputs(2)
    want = app.reference(*args)
    for kernel, kinds in (
        (app.global_sharded, ["all_gather", "reduce_scatter"]),
        (app.global_replicated, ["all_reduce"]),
    ):
        sim = kernel.verify(*args)
        np.testing.assert_array_equal(sim.outputs, want)
        assert sim.cycles == sim.predicted_cycles
        assert [c["kind"] for c in sim.design.report["collectives"]] == kinds


@pytest.mark.rtl
def test_the_fixed_point_logistic_step_gives_the_same_weights_sharded_or_replicated():
    """patterns/mesh/logreg_step.py: fixed-point arguments and result on a mesh; the
    weights' placement picks the sharded update (all-gather, reduce-scatter) or the
    replicated one (all-reduce); both equal the golden model bit for bit."""
    app, sharded = load("logreg_step")
    args = app.inputs(1)
    want = sharded(*args)
    np.testing.assert_array_equal(app.replicated(*args), want)
    for kernel, kinds in ((sharded, ["all_gather", "reduce_scatter"]), (app.replicated, ["all_reduce"])):
        sim = kernel.verify(*args)
        np.testing.assert_array_equal(sim.outputs, want)
        assert sim.cycles == sim.predicted_cycles
        assert [c["kind"] for c in sim.design.report["collectives"]] == kinds
