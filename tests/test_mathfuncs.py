"""Fixed point and its functions: the boundary rules, the measured error of each function
against float64 (the bounds the README documents), and bit-exact hardware."""

import numpy as np
import pytest

import hwgen as hw

fx = hw.fixed(16, 16)
N = 2048


def on_grid(v):
    return np.floor(np.asarray(v, dtype=np.float64) * 65536) / 65536


@hw.kernel
def functions(x: hw.Array[fx, N], p: hw.Array[fx, N]):
    return (
        hw.map(N, lambda i: hw.exp(x[i])),
        hw.map(N, lambda j: hw.log(p[j])),
        hw.map(N, lambda k: hw.sqrt(p[k])),
        hw.map(N, lambda m: hw.sigmoid(x[m])),
        hw.map(N, lambda n: hw.abs(x[n])),
    )


def function_inputs():
    x = on_grid(np.linspace(-10, 10, N))
    p = on_grid(np.geomspace(1e-3, 30000, N))
    return x, p


# error / max(1, |exact|): absolute below 1, relative above (the README's table)
BOUNDS = {"exp": 2.5e-5, "log": 5e-5, "sqrt": 3e-5, "sigmoid": 7e-5, "abs": 0}


def test_function_errors_against_float64():
    x, p = function_inputs()
    exact = {"exp": np.exp(x), "log": np.log(p), "sqrt": np.sqrt(p), "sigmoid": 1 / (1 + np.exp(-x)), "abs": np.abs(x)}
    for name, got in zip(BOUNDS, functions(x, p)):
        err = np.max(np.abs(got - exact[name]) / np.maximum(1, np.abs(exact[name])))
        assert err <= BOUNDS[name], (name, err)


@hw.kernel
def edges(x: hw.Array[fx, 8]):
    return hw.map(8, lambda i: hw.log(x[i])), hw.map(8, lambda j: hw.sqrt(x[j])), hw.map(8, lambda k: hw.exp(x[k]))


def test_function_edges_saturate():
    x = np.array([0, -1, 2**-16, 32767, -32768, 20, -20, 1])
    log, sqrt, exp = edges(x)
    assert log[0] == log[1] == -32768  # log of x <= 0: the most negative value
    assert sqrt[0] == sqrt[1] == 0
    assert exp[3] == exp[5] == 32768 - 2**-16  # saturates at the maximum
    assert exp[4] == 0 and exp[6] == 0  # exp(-20) is below the grid


@hw.kernel
def scale(x: hw.Array[fx, 4], y: hw.Array[fx, 4]) -> hw.Array[fx, 4]:
    return hw.map(4, lambda i: x[i] * y[i] + 0.5)


def test_fixed_point_boundary_rounds_down_and_returns_floats():
    out = scale(np.array([1.75, -1.5, 2**-17, 3.0]), np.array([2.0, 3.0, 1.0, -1 / 3]))
    assert out.dtype == np.float64
    # 2**-17 rounds down to 0; -1/3 rounds down to the grid; the product rounds down too
    third = np.floor(-65536 / 3) / 65536
    np.testing.assert_array_equal(out, [4.0, -4.0, 0.5, np.floor(3 * third * 65536) / 65536 + 0.5])


@pytest.mark.rtl
def test_functions_in_verilator_are_bit_exact():
    x, p = function_inputs()
    r = functions.with_schedule(tile={n: 256 for n in "ijkmn"}, par={"i": 2, "j": 2}).verify(x, p)
    assert r.cycles == r.predicted_cycles
