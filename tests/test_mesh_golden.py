"""The mesh golden model (hw.shard_map and the collectives) against plain numpy references
written out PE by PE, independently of hwgen/mesh/spmd.py."""

import re
from pathlib import Path

import markers
import numpy as np
import pytest

import hwgen as hw
from hwgen import int8, int32

M24 = hw.Mesh((2, 4), ("x", "y"))
RNG = np.random.default_rng(7)


def rand(shape, dtype=np.int32, lo=-1000, hi=1000):
    return RNG.integers(lo, hi, shape).astype(dtype)


def blocks_2x4(g):
    """PE (ix, iy)'s block of g split as P('x', 'y') over the 2x4 mesh."""
    bx, by = g.shape[0] // 2, g.shape[1] // 4
    return {(ix, iy): g[ix * bx : (ix + 1) * bx, iy * by : (iy + 1) * by] for ix in range(2) for iy in range(4)}


def assemble_2x4(local):
    """The global array of per-PE blocks placed as P('x', 'y')."""
    return np.concatenate([np.concatenate([local[ix, iy] for iy in range(4)], 1) for ix in range(2)], 0)


def smap(body, shape, in_spec, out_spec, dtype=int32, mesh=M24):
    """A kernel applying shard_map(body) to one global array."""

    @hw.kernel(mesh=mesh)
    def k(a: hw.Array[(dtype, *shape)]):
        return hw.shard_map(body, mesh=mesh, in_specs=(in_spec,), out_specs=out_spec)(a)

    return k


def test_mesh_shape_size_names_and_pe_ids():
    m = hw.Mesh((4, 4), ("x", "y"), topology="torus")
    assert m.shape == {"x": 4, "y": 4} and list(m.shape) == ["x", "y"]
    assert m.size == 16 and m.axis_names == ("x", "y") and m.topology == "torus"
    assert [m.coords(p) for p in range(5)] == [(0, 0), (0, 1), (0, 2), (0, 3), (1, 0)]
    assert all(m.pe_id(m.coords(p)) == p for p in range(16))
    r = hw.Mesh((8,), ("r",), topology="ring")
    assert r.shape == {"r": 8} and r.size == 8
    assert hw.Mesh((2, 4), ("x", "y")) == M24 and hw.Mesh((2, 4), ("x", "y"), "mesh") != M24
    assert hw.P("x", None, ("x", "y")).entries == (("x",), None, ("x", "y"))
    assert repr(hw.P("x", None, ("x", "y"))) == "P('x', None, ('x', 'y'))"
    assert hw.LinkConfig() == hw.LinkConfig(words_per_cycle=1, latency=8)


def test_kernel_stores_mesh_and_link():
    link = hw.LinkConfig(words_per_cycle=2, latency=4)

    @hw.kernel(mesh=M24, link=link, tile={"i": 2})
    def k(a: hw.Array[int32, 8]) -> hw.Array[int32, 8]:
        return hw.shard_map(lambda b: hw.map(4, lambda i: b[i] * 2), mesh=M24, in_specs=hw.P("x"), out_specs=hw.P("x"))(
            a
        )

    assert k.mesh is M24 and k.link is link
    k2 = k.with_schedule(tile={"i": 4})
    assert k2.mesh is M24 and k2.link is link and k2.schedule.tile == {"i": 4}
    a = rand(8)
    np.testing.assert_array_equal(k2(a), a * 2)


def test_spec_example_column_sum():
    mesh = hw.Mesh((4, 4), ("x", "y"), topology="torus")

    @hw.kernel(mesh=mesh, tile={"i": 16, "j": 64}, par={"j": 8})
    def colsum(x: hw.Array[int32, 256, 64]) -> hw.Array[int32, 64]:
        def body(xl):
            s = hw.map(64, lambda j: hw.sum(16, lambda i: xl[i, j]))
            return hw.psum(s, ("x", "y"))

        return hw.shard_map(body, mesh=mesh, in_specs=(hw.P(("x", "y"), None),), out_specs=hw.P())(x)

    x = rand((256, 64))
    np.testing.assert_array_equal(colsum(x), x.sum(0, dtype=np.int32))


def test_psum_over_one_axis_and_wraparound():
    g = rand((4, 8))
    k = smap(lambda b: hw.psum(b, "y"), (4, 8), hw.P("x", "y"), hw.P("x", "y"))
    blk = blocks_2x4(g)
    want = {(ix, iy): sum(blk[ix, j] for j in range(4)) for ix in range(2) for iy in range(4)}
    np.testing.assert_array_equal(k(g), assemble_2x4(want))
    big = np.full((4, 8), 2**30, np.int32)
    k2 = smap(lambda b: hw.psum(b, ("x", "y")), (4, 8), hw.P("x", "y"), hw.P())
    np.testing.assert_array_equal(k2(big), np.full((2, 2), 0, np.int32))  # 8 * 2**30 wraps to 0
    k8 = smap(lambda b: hw.psum(b, ("x", "y")), (4, 8), hw.P("x", "y"), hw.P(), dtype=int8)
    out = k8(np.full((4, 8), 100, np.int8))
    assert out.dtype == np.int8 and (out == 32).all()  # 800 wraps to 32 in int8


def test_pmax_pmin():
    g = rand((2, 8))
    blk = blocks_2x4(g)
    for fn, red in ((hw.pmax, np.maximum), (hw.pmin, np.minimum)):
        k = smap(lambda b, fn=fn: fn(b, "x"), (2, 8), hw.P("x", "y"), hw.P(None, "y"))
        want = np.concatenate([red(blk[0, iy], blk[1, iy]) for iy in range(4)], 1)
        np.testing.assert_array_equal(k(g), want)


def test_all_gather_tiled_and_untiled():
    g = rand((2, 8))  # blocks (1, 2)
    blk = blocks_2x4(g)
    k = smap(lambda b: hw.all_gather(b, ("x", "y"), axis=0, tiled=True), (2, 8), hw.P("x", "y"), hw.P())
    np.testing.assert_array_equal(k(g), np.concatenate([blk[ix, iy] for ix in range(2) for iy in range(4)], 0))
    k = smap(lambda b: hw.all_gather(b, "y", axis=1), (2, 8), hw.P("x", "y"), hw.P("x"))
    out = k(g)
    assert out.shape == (2, 4, 2)
    for ix in range(2):
        for j in range(4):
            np.testing.assert_array_equal(out[ix, j], blk[ix, j][0])


def test_psum_scatter_tiled_and_untiled():
    g = rand((4, 32))  # blocks (2, 8)
    blk = blocks_2x4(g)
    k = smap(
        lambda b: hw.psum_scatter(b, "y", scatter_dimension=1, tiled=True), (4, 32), hw.P("x", "y"), hw.P("x", "y")
    )
    out = k(g)
    for ix in range(2):
        total = sum(blk[ix, iy] for iy in range(4))
        np.testing.assert_array_equal(out[2 * ix : 2 * ix + 2], total)  # PE j holds columns 2j, 2j+1
    g = rand((8, 12))  # blocks (4, 3): dimension 0 has the group's size
    blk = blocks_2x4(g)
    k = smap(lambda b: hw.psum_scatter(b, "y", scatter_dimension=0), (8, 12), hw.P("x", "y"), hw.P(("x", "y")))
    out = k(g)
    assert out.shape == (24,)  # each PE's (3,) row, PE 4 * ix + j at block 4 * ix + j
    for ix in range(2):
        total = sum(blk[ix, iy] for iy in range(4))
        for j in range(4):
            np.testing.assert_array_equal(out[3 * (4 * ix + j) : 3 * (4 * ix + j) + 3], total[j])


def test_ppermute_partial_and_over_two_axes():
    g = rand((2, 4))
    k = smap(lambda b: hw.ppermute(b, "y", [(0, 1), (1, 2), (2, 3)]), (2, 4), hw.P("x", "y"), hw.P("x", "y"))
    want = np.zeros_like(g)
    want[:, 1:] = g[:, :3]
    np.testing.assert_array_equal(k(g), want)
    k = smap(
        lambda b: hw.ppermute(b, ("x", "y"), [(p, (p + 1) % 8) for p in range(8)]),
        (2, 4),
        hw.P("x", "y"),
        hw.P("x", "y"),
    )
    np.testing.assert_array_equal(k(g).reshape(-1), np.roll(g.reshape(-1), 1))
    k = smap(lambda b: hw.ppermute(b, ("y", "x"), [(0, 1)]), (2, 4), hw.P("x", "y"), hw.P("x", "y"))
    want = np.zeros_like(g)
    want[0, 1] = g[0, 0]  # as in JAX, ppermute numbers ('y', 'x') in mesh order: 1 is ix=0, iy=1
    np.testing.assert_array_equal(k(g), want)


def test_all_to_all_tiled_and_untiled():
    g = rand((8, 8))  # blocks (4, 2)
    blk = blocks_2x4(g)
    k = smap(lambda b: hw.all_to_all(b, "y", 0, 1, tiled=True), (8, 8), hw.P("x", "y"), hw.P("x", "y"))
    out = k(g)
    assert out.shape == (2, 32)
    for ix in range(2):
        for j in range(4):
            want = np.concatenate([blk[ix, i][j : j + 1] for i in range(4)], 1)
            np.testing.assert_array_equal(out[ix : ix + 1, 8 * j : 8 * j + 8], want)
    k = smap(lambda b: hw.all_to_all(b, "y", 0, 1), (8, 8), hw.P("x", "y"), hw.P("x", "y"))
    out = k(g)
    assert out.shape == (4, 16)
    for ix in range(2):
        for j in range(4):
            got = out[2 * ix : 2 * ix + 2, 4 * j : 4 * j + 4]
            for i in range(4):
                np.testing.assert_array_equal(got[:, i], blk[ix, i][j, :])


def test_axis_index_order_and_out_spec_leaving_an_axis_out():
    k = smap(lambda b: b + hw.axis_index(("x", "y")), (2, 4), hw.P("x", "y"), hw.P("x", "y"))
    np.testing.assert_array_equal(k(np.zeros((2, 4), np.int32)), np.arange(8).reshape(2, 4))
    k = smap(lambda b: b + hw.axis_index(("y", "x")), (2, 4), hw.P("x", "y"), hw.P("x", "y"))
    np.testing.assert_array_equal(k(np.zeros((2, 4), np.int32)), [[2 * iy + ix for iy in range(4)] for ix in range(2)])
    g = rand((2, 8))
    k = smap(lambda b: b * 10 + hw.axis_index("x"), (2, 8), hw.P("x", "y"), hw.P(None, "y"))
    np.testing.assert_array_equal(k(g), g[:1] * 10)  # the PE with x index 0


def test_scalars_multiple_results_and_chained_collectives():
    @hw.kernel(mesh=M24)
    def k(a: hw.Array[int32, 8, 8], s: int32):
        def body(b, t):
            total = hw.sum(4, lambda i: hw.sum(2, lambda j: b[i, j]))
            everyone = hw.psum(total, ("x", "y"))  # a scalar
            shifted = hw.ppermute(b, "y", [(k, (k + 1) % 4) for k in range(4)])
            again = hw.pmax(hw.psum(shifted, "x"), "y")
            return everyone + t, again

        return hw.shard_map(body, mesh=M24, in_specs=(hw.P("x", "y"), hw.P()), out_specs=(hw.P(), hw.P("x", "y")))(a, s)

    a = rand((8, 8))
    total, again = k(a, np.int32(5))
    assert total == a.sum(dtype=np.int32) + 5 and np.asarray(total).dtype == np.int32
    blk = blocks_2x4(a)
    colsum = {iy: blk[0, iy] + blk[1, iy] for iy in range(4)}  # psum over x of the shifted blocks
    m = np.maximum.reduce([colsum[iy] for iy in range(4)])
    np.testing.assert_array_equal(again, np.tile(m, (2, 4)))


def test_body_reads_a_kernel_array_whole():
    @hw.kernel(mesh=M24)
    def k(a: hw.Array[int32, 8], w: hw.Array[int32, 4]) -> hw.Array[int32, 8]:
        body = lambda b: hw.map(4, lambda i: b[i] * w[i] + hw.axis_index("y"))  # noqa: E731
        return hw.shard_map(body, mesh=M24, in_specs=hw.P("x"), out_specs=hw.P("x"))(a)

    a, w = rand(8), rand(4)
    np.testing.assert_array_equal(k(a, w), a * np.tile(w, 2))  # the PEs with y index 0


def test_ring_of_eight():
    ring = hw.Mesh((8,), ("r",), topology="ring")

    @hw.kernel(mesh=ring)
    def k(a: hw.Array[int32, 16]) -> hw.Array[int32, 16]:
        body = lambda b: hw.psum(hw.ppermute(b, "r", [(p, (p + 1) % 8) for p in range(8)]), "r") + b  # noqa: E731
        return hw.shard_map(body, mesh=ring, in_specs=hw.P("r"), out_specs=hw.P("r"))(a)

    a = rand(16)
    total = a.reshape(8, 2).sum(0, dtype=np.int32)
    np.testing.assert_array_equal(k(a), (a.reshape(8, 2) + total).reshape(-1))


@pytest.mark.parametrize("method", ["build", "elaborate", "simulate", "verify", "synthesize"])
def test_mesh_hardware_is_refused(method):
    grid = hw.Mesh((2, 4), ("x", "y"), topology="mesh")  # a collective of a scalar: not built yet

    @hw.kernel(mesh=grid)
    def k(a: hw.Array[int32, 64]) -> hw.Array[int32, 64]:
        def body(b):
            s = hw.psum(hw.sum(8, lambda i: b[i]), ("x", "y"))  # L:refused
            return hw.map(8, lambda j: b[j] + s)

        return hw.shard_map(body, mesh=grid, in_specs=hw.P(("x", "y")), out_specs=hw.P(("x", "y")))(a)

    args = (np.zeros(64, np.int32),) if method in ("simulate", "verify") else ()
    with pytest.raises(hw.UnsupportedError) as e:
        getattr(k, method)(*args)
    verb = "build" if method == "synthesize" else method  # synthesis builds first
    assert e.value.message.startswith(
        f"cannot {verb} kernel 'k' on mesh 2x4 mesh (x, y): the operand of psum must be an array, not a scalar"
    )
    assert e.value.message.endswith("the golden model k(*arrays) works")
    assert e.value.file == __file__
    assert open(__file__).read().splitlines()[e.value.line - 1].endswith("# L:refused")


def test_the_example_in_docs_mesh_md_runs():
    text = (Path(__file__).resolve().parent.parent / "docs" / "mesh.md").read_text()
    code = re.findall(r"```python\n(.*?)```", text, re.S)[0]
    exec(compile(code, "docs/mesh.md", "exec"), {})  # it asserts its own result


def test_two_shard_maps_in_one_kernel():
    @hw.kernel(mesh=M24)
    def k(a: hw.Array[int32, 8, 8]) -> hw.Array[int32, 16, 4]:
        first = hw.shard_map(lambda b: b, mesh=M24, in_specs=hw.P("x", "y"), out_specs=hw.P("y", "x"))(a)
        return hw.shard_map(
            lambda b: hw.psum(b, "x") + 1, mesh=M24, in_specs=hw.P("x", None), out_specs=hw.P("x", None)
        )(first * 2)

    a = rand((8, 8))
    blk = blocks_2x4(a)  # blocks (4, 2), placed again by P('y', 'x'): row block iy, column block ix
    first = np.zeros((16, 4), np.int32)
    for ix in range(2):
        for iy in range(4):
            first[4 * iy : 4 * iy + 4, 2 * ix : 2 * ix + 2] = blk[ix, iy]
    total = first[:8] * 2 + first[8:] * 2 + 1  # rows split over x; the psum adds the two halves
    np.testing.assert_array_equal(k(a), np.concatenate([total, total]))


def test_show_ir_lists_the_per_pe_program():
    @hw.kernel(mesh=M24)
    def k(a: hw.Array[int32, 8, 12], s: int32):
        def body(b, t):
            g = hw.all_gather(b, "y", axis=0, tiled=True)
            return hw.psum(g * t, "x"), hw.axis_index("x") + t

        spmd = hw.shard_map(body, mesh=M24, in_specs=(hw.P("x", "y"), hw.P()), out_specs=(hw.P(None, "y"), hw.P()))
        return spmd(a, s)  # L:show-call

    line = markers.line_of(__file__, "show-call")  # where the shard_map is applied
    assert k.show_ir().split("\n")[-7:] == [
        f"  shard_map0 on 2x4 torus (x, y) at line {line}",
        "    local %shard0.0: int32[4, 3] = a split by P('x', 'y')",
        "    local %shard0.1: int32[] = map[] s split by P()",
        "    %c0 = all_gather(%shard0.0, ('y',), axis=0, tiled=True): int32[16, 3]",
        "    %c1 = psum(map[@0<16, @1<3] (%c0[@0, @1] * %shard0.1[]), ('x',)): int32[16, 3]",
        "    result 0: int32[16, 3] = %c1 joined by P(None, 'y')",
        "    result 1: int32[] = map[] (%axis.x + %shard0.1[]) joined by P()",
    ]


def test_a_body_reading_another_shard_maps_result():
    ring = hw.Mesh((4,), ("r",), topology="ring")

    def scaled(w):  # traced in both bodies: the same (PE-dependent) node twice
        return hw.map(2, lambda i: w[i] * hw.axis_index("r"))

    @hw.kernel(mesh=ring)
    def k(a: hw.Array[int32, 8], w: hw.Array[int32, 2]) -> hw.Array[int32, 8]:
        first = hw.shard_map(lambda b: b + scaled(w), mesh=ring, in_specs=hw.P("r"), out_specs=hw.P("r"))(a)
        return hw.shard_map(lambda b: scaled(w) + first[0:2] + b, mesh=ring, in_specs=hw.P("r"), out_specs=hw.P("r"))(a)

    a, w = rand(8), rand(2)
    first = a + np.repeat(np.arange(4), 2) * np.tile(w, 4)
    want = np.repeat(np.arange(4), 2) * np.tile(w, 4) + np.tile(first[0:2], 4) + a
    np.testing.assert_array_equal(k(a, w), want)
