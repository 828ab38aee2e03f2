"""Collectives as stages of a tile loop (`@hw.kernel(collective_stages=True)`): an all-reduce
of an array that a metapipelined loop computes tile by tile runs as the loop's last stage,
each iteration on the rows it stored, beside the computation of the next tile; results equal
the golden model, cycles the model's."""

import markers
import numpy as np
import pytest

import hwgen as hw
from hwgen import int32


def sums(p: int, n: int, rows: int, staged: bool, meta: bool = True, op=hw.psum, axis="x", shape=None):
    """Each PE's n sums of squares of its rows of `a`, all-reduced by `op` over `axis`, tiles of
    `rows` rows."""
    mesh = hw.Mesh(shape or (p,), ("x", "y")[: len(shape or (p,))], topology="ring" if shape is None else "torus")

    @hw.kernel(
        mesh=mesh,
        link=hw.LinkConfig(latency=8),
        tile={"i": rows, "k": 8},
        par={"k": 4},
        metapipeline=meta,
        collective_stages=staged,
    )
    def grad(a: hw.Array[int32, mesh.size * n, 8]):
        def body(b):
            g = hw.map(n, lambda i: hw.sum(8, lambda k: b[i, k] * b[i, k]) + i)
            return op(g, axis)

        return hw.shard_map(body, mesh=mesh, in_specs=hw.P(mesh.axis_names), out_specs=hw.P())(a)

    return grad


def _data(p: int, n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(-100, 100, (p * n, 8)).astype(np.int32)


@pytest.mark.rtl
def test_an_all_reduce_runs_as_the_last_stage_of_its_operands_tile_loop():
    plain, staged = sums(4, 1024, 256, False), sums(4, 1024, 256, True)
    a = _data(4, 1024)
    whole = plain.verify(a)
    sim = staged.verify(a)  # bit-exact against the golden model
    np.testing.assert_array_equal(sim.outputs, whole.outputs)
    assert sim.cycles == sim.predicted_cycles
    assert sim.cycles < whole.cycles  # each tile's all-reduce beside the next tile's sums
    report = sim.design.report
    assert report["collectives"][0]["stage_iterations"] == 4
    assert report["collectives"][0]["phases"][0]["words"] == 256
    assert report["link_bound_cycles"] == whole.design.report["link_bound_cycles"]
    loop = report["controllers"]["stages"][0]
    assert loop["metapipeline"] and loop["iterations"] == 4 and "collective" in loop["stages"][-1]


@pytest.mark.rtl
@pytest.mark.parametrize(
    "p, n, rows, meta, op, axis, shape",
    [
        (2, 512, 128, False, hw.psum, "x", None),  # one stage after another
        (8, 512, 256, True, hw.pmax, "x", None),
        (4, 256, 64, True, hw.pmin, "y", (2, 2)),  # along one axis of a torus
    ],
)
def test_collective_stages_keep_the_result_under_other_schedules(p, n, rows, meta, op, axis, shape):
    k = sums(p, n, rows, True, meta, op, axis, shape)
    a = _data(p, n, seed=p)
    sim = k.verify(a)
    np.testing.assert_array_equal(sim.outputs, k(a))
    assert sim.cycles == sim.predicted_cycles
    assert sim.design.report["collectives"][0]["stage_iterations"] == n // rows


@pytest.mark.rtl
def test_a_collective_stage_never_runs_beside_another_collective():
    """The gather of the weights is no stage (its operand is an argument), the psum is: the
    root's entries then run one after another, never two collectives on the links at once."""
    ring = hw.Mesh((4,), ("x",), topology="ring")

    @hw.kernel(mesh=ring, tile={"i": 64, "k": 8}, par={"k": 4}, collective_stages=True)
    def k(a: hw.Array[int32, 4 * 256, 8], w: hw.Array[int32, 32]):
        def body(b, wl):
            wall = hw.all_gather(wl, "x", tiled=True)
            g = hw.map(256, lambda i: hw.sum(8, lambda k: b[i, k] * wall[k]))
            return hw.psum(g, "x")

        split = hw.P("x")
        return hw.shard_map(body, mesh=ring, in_specs=(split, split), out_specs=hw.P())(a, w)

    rng = np.random.default_rng(5)
    a, w = rng.integers(-100, 100, (1024, 8)).astype(np.int32), rng.integers(-100, 100, 32).astype(np.int32)
    sim = k.verify(a, w)
    np.testing.assert_array_equal(sim.outputs, (a.astype(np.int64) @ w[:8]).reshape(4, 256).sum(0).astype(np.int32))
    assert sim.cycles == sim.predicted_cycles
    assert [c.get("stage_iterations") for c in sim.design.report["collectives"]] == [None, 4]
    assert all("parallel" not in s for s in sim.design.report["controllers"]["stages"])


def test_collective_stages_take_true_or_false_on_a_mesh_kernel():
    with pytest.raises(hw.ScheduleError) as e:

        @hw.kernel(mesh=hw.Mesh((4,), ("x",), topology="ring"), collective_stages="yes")  # L:yes
        def k(a: hw.Array[int32, 8]):
            return a

    why = "collective_stages must be True or False, got 'yes'"
    markers.check_error(e.value, hw.ScheduleError, why, __file__, "yes")
    with pytest.raises(hw.ScheduleError) as e:

        @hw.kernel(collective_stages=True)  # L:no-mesh
        def one(a: hw.Array[int32, 8]):
            return a + 1

    why = "collective_stages= runs a mesh kernel's collectives in tile loops; it needs mesh= too"
    markers.check_error(e.value, hw.ScheduleError, why, __file__, "no-mesh")


def _untiled():
    ring = hw.Mesh((4,), ("x",), topology="ring")

    @hw.kernel(mesh=ring, tile={"i": 16}, collective_stages=True)
    def k(a: hw.Array[int32, 64]):
        def body(b):
            return hw.psum(hw.map(16, lambda i: b[i] * 3), "x")

        return hw.shard_map(body, mesh=ring, in_specs=hw.P("x"), out_specs=hw.P())(a)  # L:untiled

    return k


def _one_row():
    ring = hw.Mesh((4,), ("x",), topology="ring")

    @hw.kernel(mesh=ring, collective_stages=True)
    def k(a: hw.Array[int32, 64]):
        def body(b):
            return hw.psum(hw.map(16, lambda i: b[i] * 3), "x")

        return hw.shard_map(body, mesh=ring, in_specs=hw.P("x"), out_specs=hw.P())(a)  # L:one-row

    return k


def _scatter():
    ring = hw.Mesh((4,), ("x",), topology="ring")

    @hw.kernel(mesh=ring, tile={"i": 4}, collective_stages=True)
    def k(a: hw.Array[int32, 64]):
        def body(b):
            return hw.psum_scatter(hw.map(16, lambda i: b[i] * 3), "x", tiled=True)

        return hw.shard_map(body, mesh=ring, in_specs=hw.P("x"), out_specs=hw.P("x"))(a)  # L:scatter

    return k


@pytest.mark.parametrize(
    "make, why, marker",
    [
        (
            _untiled,
            "the operand of hw.psum must be computed in tiles of its rows (a tile of dimension 0 smaller than it, "
            "the other dimensions whole)",
            "untiled",
        ),
        (
            _one_row,
            "each iteration of the tile loop computing the operand of hw.psum stores 1 word, which cannot be "
            "all-reduced on their own (each of the 4 PEs' blocks of them must be whole DRAM beats of 4 words); "
            "give dimension 0 a larger tile",
            "one-row",
        ),
        (_scatter, "only an all-reduce over one axis runs as a stage, not hw.psum_scatter over 'x'", "scatter"),
    ],
)
def test_collective_stages_with_nothing_to_stage_say_why(make, why, marker):
    k = make()
    with pytest.raises(hw.UnsupportedError) as e:
        k.elaborate()
    assert f"collective_stages=True, but no collective can run as a stage: {why}" in e.value.message
    assert e.value.file == __file__
    assert open(__file__).read().splitlines()[e.value.line - 1].endswith(f"# L:{marker}")
    a = np.arange(64, dtype=np.int32)
    np.testing.assert_array_equal(k(a), 3 * a.reshape(4, 16).sum(axis=0))  # the golden model works
