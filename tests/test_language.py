"""The rest of the pattern language: multifold, groupby_fold, filter / flatmap, argmin /
argmax and division. Each is checked in the golden model against numpy written here, then in
Verilator (bit-exact, cycles as predicted) under a tiled schedule."""

import numpy as np
import pytest

import hwgen as hw
from hwgen import int16, int32, int64, uint8
from hwgen_sim import runner

N = 64


def order_of_first_appearance(keys):
    seen = []
    for k in keys:
        if k not in seen:
            seen.append(int(k))
    return seen


@hw.kernel
def histogram(x: hw.Array[uint8, N], w: hw.Array[int32, N, 4]):
    counts = hw.multifold(N, hw.zeros(8, int32), lambda i: (x[i] % 8, 1))
    rows = hw.multifold(N, hw.zeros((8, 4), int32), lambda j: (x[j] // 32, hw.map(4, lambda c: w[j, c])))
    return counts, rows


def test_multifold_index_and_slice_targets():
    rng = np.random.default_rng(0)
    x, w = rng.integers(0, 256, N, dtype=np.uint8), rng.integers(-99, 99, (N, 4), dtype=np.int32)
    counts, rows = histogram(x, w)
    np.testing.assert_array_equal(counts, np.bincount(x % 8, minlength=8))
    want = np.zeros((8, 4), np.int64)
    np.add.at(want, x // 32, w)
    np.testing.assert_array_equal(rows, want)


@hw.kernel
def groups(k: hw.Array[int32, N], v: hw.Array[int32, N]):
    return hw.groupby_fold(N, lambda i: (k[i], (v[i], 1)), max_keys=8)


def group_inputs(distinct: int, seed=0):
    rng = np.random.default_rng(seed)
    return rng.integers(0, distinct, N, dtype=np.int32) * 7 - 20, rng.integers(-50, 50, N, dtype=np.int32)


def test_groupby_fold_in_order_of_first_appearance():
    k, v = group_inputs(6)
    keys, values, count = groups(k, v)
    order = order_of_first_appearance(k)
    assert count == len(order)
    np.testing.assert_array_equal(keys[:count], order)
    for slot, key in enumerate(order):
        assert list(values[slot]) == [v[k == key].sum(), (k == key).sum()]
    assert not keys[count:].any() and not values[count:].any()


def test_groupby_fold_overflow_is_an_error_in_the_golden_model():
    k, v = group_inputs(20)
    with pytest.raises(hw.CapacityError) as e:
        groups(k, v)
    assert str(e.value).endswith("hw.groupby_fold saw more than max_keys=8 distinct keys; raise max_keys")
    assert "test_language.py:" in str(e.value)


@hw.kernel
def compact(v: hw.Array[int32, N]):
    kept, n_kept = hw.filter(N, lambda i: v[i] > 0, lambda i: v[i] * 2)
    both, n_both = hw.flatmap(N, lambda j: (hw.emit(v[j], when=v[j] > 20), hw.emit(-v[j], when=v[j] < -20)), max_out=2)
    return kept, n_kept, both, n_both


def test_filter_and_flatmap_compact_in_index_order():
    v = np.random.default_rng(1).integers(-50, 50, N, dtype=np.int32)
    kept, n_kept, both, n_both = compact(v)
    want = v[v > 0] * 2
    assert n_kept == len(want) and kept.shape == (N,)
    np.testing.assert_array_equal(kept[:n_kept], want)
    assert not kept[n_kept:].any()
    want = [y for x in v for y in ([x] if x > 20 else []) + ([-x] if x < -20 else [])]
    assert n_both == len(want) and both.shape == (2 * N,)
    np.testing.assert_array_equal(both[:n_both], want)
    assert not both[n_both:].any()


@hw.kernel
def extremes(x: hw.Array[int16, N], y: hw.Array[hw.uint32, N]):
    return hw.argmin(x), hw.argmax(x), hw.argmin(y), hw.argmax(y)


def test_argmin_argmax_first_extreme_wins_ties():
    rng = np.random.default_rng(2)
    for _ in range(5):
        x = rng.integers(-3, 3, N, dtype=np.int16)
        y = rng.integers(0, 2**32, N, dtype=np.uint32)
        got = extremes(x, y)
        assert [int(g) for g in got] == [np.argmin(x), np.argmax(x), np.argmin(y), np.argmax(y)]


@hw.kernel(tile={"i": 64, "j": 64, "k": 64, "m": 64, "p": 64, "q": 64}, par={"i": 2})
def divide(
    a: hw.Array[int32, N], b: hw.Array[int32, N], c: hw.Array[uint8, N], d: hw.Array[int16, N], e: hw.Array[int64, N]
):
    return (
        hw.map(N, lambda i: a[i] // b[i]),
        hw.map(N, lambda j: a[j] % b[j]),
        hw.map(N, lambda k: c[k] // (c[k] % 7 + 1)),
        hw.map(N, lambda m: d[m] % 10),
        hw.map(N, lambda p: e[p] // d[p]),
        hw.map(N, lambda q: a[q] // 8),
    )


def divide_inputs():
    rng = np.random.default_rng(3)
    a = rng.integers(-(2**31), 2**31, N, dtype=np.int32)
    b = rng.integers(-50, 50, N, dtype=np.int32)
    a[:4], b[:4] = [-(2**31), -(2**31), 7, -7], [-1, 0, 0, 3]  # overflow, zero divisors, rounding
    c = rng.integers(0, 256, N, dtype=np.uint8)
    d = rng.integers(-(2**15), 2**15, N, dtype=np.int16)
    e = rng.integers(-(2**63), 2**63, N, dtype=np.int64)
    d[0], e[1], d[1] = 0, -(2**63), -1
    return a, b, c, d, e


def test_division_follows_numpy():
    a, b, c, d, e = divide_inputs()
    with np.errstate(all="ignore"):
        want = (a // b, a % b, c // (c % 7 + 1), d % 10, e // d, a // 8)
    for g, w in zip(divide(a, b, c, d, e), want):
        np.testing.assert_array_equal(g, w)


# ---------------------------------------------------------------- the same in Verilator


@pytest.mark.rtl
@pytest.mark.parametrize("case", ["histogram", "groups", "compact", "extremes", "divide"])
def test_in_verilator(case, tmp_path):
    rng = np.random.default_rng(4)
    kernel, args = {
        "histogram": (
            histogram.with_schedule(tile={"i": 16, "j": 16}),
            (rng.integers(0, 256, N, dtype=np.uint8), rng.integers(-99, 99, (N, 4), dtype=np.int32)),
        ),
        "groups": (groups.with_schedule(tile={"i": 16}), group_inputs(6)),
        "compact": (compact.with_schedule(tile={"i": 32, "j": 16}), (rng.integers(-50, 50, N, dtype=np.int32),)),
        "extremes": (extremes, (rng.integers(-3, 3, N, dtype=np.int16), rng.integers(0, 2**32, N, dtype=np.uint32))),
        "divide": (divide, divide_inputs()),
    }[case]
    r = kernel.verify(*args)
    assert r.cycles == r.predicted_cycles
    design = kernel.build(out_dir=tmp_path)
    warnings = runner.lint(design.paths["verilog"], design.paths["waivers"])
    assert "%Warning" not in warnings and "%Error" not in warnings, warnings


@pytest.mark.rtl
def test_groupby_overflow_is_flagged_by_the_hardware():
    k, v = group_inputs(20)
    with pytest.raises(hw.CapacityError) as e:
        groups.with_schedule(tile={"i": 16}).simulate(k, v)
    assert str(e.value).endswith("hw.groupby_fold saw more than max_keys=8 distinct keys; raise max_keys")


def test_public_names_survive_importing_every_module():
    """A submodule named like a public function (hwgen.emit was one) replaces the function
    once something imports it."""
    import importlib
    import pkgutil
    import types

    for info in pkgutil.walk_packages(hw.__path__, "hwgen."):
        importlib.import_module(info.name)
    shadowed = [n for n in hw.__all__ if isinstance(getattr(hw, n), types.ModuleType)]
    assert shadowed == []
