"""hw.concatenate and hw.roll (numpy's), and a mesh PE's collectives running beside the work that
does not depend on them (passes/overlap.py): golden model against numpy, hardware against the
golden model in the predicted cycles, the overlap seen in PE 0's measured timeline, and every
refusal with its message and the user's line (marked `# L:<name>`)."""

import markers
import numpy as np
import pytest

import hwgen as hw
from hwgen import int16, int32
from hwgen.loops import Collective, Parallel

HERE = __file__
RING4 = hw.Mesh((4,), ("x",), topology="ring")


def check(err, kind, message, marker):
    markers.check_error(err, kind, message, HERE, marker)


@hw.kernel(tile={"i": 4})
def joined(a: hw.Array[int32, 8, 4], b: hw.Array[int32, 4, 4]):
    x = hw.map((8, 4), lambda i, j: a[i, j] * 2 - 1)
    return hw.concatenate([x, b, a])


@hw.kernel
def side_by_side(a: hw.Array[int16, 6, 4]):
    return hw.concatenate((a, hw.map((6, 2), lambda i, j: a[i, j + 2] + 1)), axis=-1)


@hw.kernel(tile={"i": 2})
def tiled_grid(a: hw.Array[int32, 6, 5]):
    """A 3x2 grid of parts, row strips of column parts: every part stored in its place."""
    edge = hw.map((1, 5), lambda r, c: a[0, c] - 7)
    middle = hw.map((4, 3), lambda i, j: a[i + 1, j] * 3)
    return hw.concatenate(
        [edge, hw.concatenate([middle, hw.map((4, 2), lambda u, v: a[u + 1, v + 3])], axis=1), a[5:6]]
    )


def some(shape, seed, dtype=np.int32):
    return np.random.default_rng(seed).integers(-500, 500, shape).astype(dtype)


def test_concatenate_is_numpys():
    a, b = some((8, 4), 0), some((4, 4), 1)
    np.testing.assert_array_equal(joined(a, b), np.concatenate([a * 2 - 1, b, a]))
    c = some((6, 4), 2, np.int16)
    np.testing.assert_array_equal(side_by_side(c), np.concatenate([c, c[:, 2:] + 1], axis=1))
    g = some((6, 5), 7)
    middle = np.concatenate([g[1:5, :3] * 3, g[1:5, 3:]], axis=1)
    np.testing.assert_array_equal(tiled_grid(g), np.concatenate([g[:1] - 7, middle, g[5:]]))


@pytest.mark.rtl
def test_a_concatenated_result_stores_each_part_in_its_place():
    sim = joined.verify(some((8, 4), 3), some((4, 4), 4))
    assert sim.cycles == sim.predicted_cycles
    sim = side_by_side.verify(some((6, 4), 5, np.int16))
    assert sim.cycles == sim.predicted_cycles
    sim = tiled_grid.verify(some((6, 5), 8))
    assert sim.cycles == sim.predicted_cycles


def test_roll_is_numpys_also_by_a_pes_coordinate():
    @hw.kernel
    def r(a: hw.Array[int32, 8]):
        return hw.roll(hw.map(8, lambda i: a[i] + 1), -3)

    a = some(8, 6)
    np.testing.assert_array_equal(r(a), np.roll(a + 1, -3))

    @hw.kernel(mesh=RING4)
    def by_pe(a: hw.Array[int32, 32]):
        def body(al):
            return hw.roll(al, hw.axis_index("x") * 3 + 1)

        return hw.shard_map(body, mesh=RING4, in_specs=hw.P("x"), out_specs=hw.P("x"))(a)

    a = some(32, 7)
    want = np.concatenate([np.roll(blk, 3 * k + 1) for k, blk in enumerate(a.reshape(4, 8))])
    np.testing.assert_array_equal(by_pe(a), want)


def test_a_joined_array_and_a_rolled_argument_are_read_only_on_a_mesh():
    @hw.kernel
    def k(a: hw.Array[int32, 4]):
        both = hw.concatenate([a, a])
        return hw.map(8, lambda i: both[i] + 1)  # L:read

    a = some(4, 10)
    np.testing.assert_array_equal(k(a), np.concatenate([a, a]) + 1)  # the golden model reads it
    with pytest.raises(hw.HwgenError) as e:
        k.elaborate()
    check(
        e.value,
        hw.UnsupportedError,
        "the result of hw.concatenate is read here: on one PE it can only be returned; read its parts instead "
        "(inside a shard_map body on a mesh, each PE stores it first)",
        "read",
    )
    with pytest.raises(hw.HwgenError) as e:

        @hw.kernel
        def k2(a: hw.Array[int32, 4]):
            return hw.roll(a + 1, 1) * 2  # L:compute

    check(
        e.value,
        hw.UnsupportedError,
        "the result of hw.roll can only be returned (by the kernel, or by a shard_map body), or read when it "
        "rolls an argument or a collective's result: compute on the parts before joining them",
        "compute",
    )

    @hw.kernel
    def k3(a: hw.Array[int32, 4]):
        return hw.roll(a, 1) * 2  # L:readroll

    np.testing.assert_array_equal(k3(a), np.roll(a, 1) * 2)  # the golden model reads it
    with pytest.raises(hw.HwgenError) as e:
        k3.elaborate()
    check(
        e.value,
        hw.UnsupportedError,
        "a rolled argument is read: on one PE read the argument at the rolled index instead (inside a "
        "shard_map body on a mesh, each PE reads its rows of it in place)",
        "readroll",
    )


def test_bad_concatenate_and_roll_arguments():
    cases = [  # (call, error, message); the error points at the call's line
        (
            lambda a, b: hw.concatenate([a, b]),
            hw.TraceError,
            "hw.concatenate: part 1 has shape (4, 2) and part 0 (4, 4); they may differ along axis 0 only",
        ),
        (
            lambda a, b: hw.concatenate([a, b.astype(hw.int16)], axis=1),
            hw.TypeMismatchError,
            "hw.concatenate: part 1 is int16 and part 0 int32; convert with .astype",
        ),
        (lambda a, b: hw.concatenate(a), hw.TraceError, "hw.concatenate takes a non-empty list or tuple of arrays"),
        (
            lambda a, b: hw.concatenate([a, a[0, 0]]),
            hw.TraceError,
            "hw.concatenate joins arrays; a part is a scalar or not traced",
        ),
        (lambda a, b: hw.roll(a[0, 0], 1), hw.TraceError, "hw.roll rolls an array"),
        (
            lambda a, b: hw.concatenate([a, b], axis=2),
            hw.TraceError,
            "hw.concatenate: axis 2 is not an axis of 2-D arrays",
        ),
        (lambda a, b: hw.roll(a, 1.5, axis=0), hw.TypeMismatchError, "hw.roll: the shift must be an integer, not 1.5"),
        (
            lambda a, b: hw.roll(a, 1),
            hw.UnsupportedError,
            "hw.roll of a 2-D array needs axis=0 (without an axis numpy rolls the flattened array)",
        ),
        (lambda a, b: hw.roll(a, 1, axis=1), hw.UnsupportedError, "hw.roll rolls along axis 0 only"),
    ]
    for fn, kind, message in cases:
        with pytest.raises(hw.HwgenError) as e:

            @hw.kernel
            def k(a: hw.Array[int32, 4, 4], b: hw.Array[int32, 4, 2]):
                return fn(a, b)

        assert type(e.value) is kind and e.value.message == message
        assert (e.value.file, e.value.line) == (HERE, fn.__code__.co_firstlineno)


def test_roll_builds_only_on_a_mesh_as_blocks_placed_by_the_pe():
    @hw.kernel
    def one_pe(a: hw.Array[int32, 8]):
        return hw.roll(a, 2)  # L:one

    with pytest.raises(hw.HwgenError) as e:
        one_pe.elaborate()
    check(
        e.value,
        hw.UnsupportedError,
        "hw.roll is built only as the result of a shard_map body on a mesh: a hw.concatenate of equal blocks "
        "rolled by whole blocks (see docs/mesh.md); on one PE, concatenate the parts in their rolled order instead",
        "one",
    )

    @hw.kernel
    def rolled_part(a: hw.Array[int32, 4]):
        return hw.concatenate([hw.roll(a, 1), a])  # L:rolled

    with pytest.raises(hw.HwgenError) as e:
        rolled_part.elaborate()
    check(e.value, hw.UnsupportedError, "a part of hw.concatenate may not be rolled itself", "rolled")
    for shift, marker, why in (
        (lambda al: hw.axis_index("x") * 3, "blocks", "hw.roll must shift by whole blocks of 4 rows on every PE"),
        (None, "notcat", "hw.roll must roll a hw.concatenate of equal blocks along axis 0"),
        (lambda al: al[0] * 4, "blocks", "the shift of hw.roll must be computed from hw.axis_index and constants"),
    ):

        @hw.kernel(mesh=RING4)
        def k(a: hw.Array[int32, 32]):
            def body(al):
                if shift is None:
                    return hw.roll(al, hw.axis_index("x"))  # L:notcat
                return hw.roll(hw.concatenate([al[:4], al[4:]]), shift(al))  # L:blocks

            return hw.shard_map(body, mesh=RING4, in_specs=hw.P("x"), out_specs=hw.P("x"))(a)

        with pytest.raises(hw.HwgenError) as e:
            k.elaborate()
        assert e.value.line == markers.line_of(HERE, marker)
        assert why in e.value.message


OVERLAP_N = 256


@hw.kernel(mesh=RING4, tile={"i": 64, "j": 64})
def gather_beside_sum(a: hw.Array[int32, 4 * OVERLAP_N], b: hw.Array[int32, 4 * OVERLAP_N]):
    n = OVERLAP_N

    def body(al, bl):
        g = hw.all_gather(bl, "x", tiled=True)  # needs nothing computed: runs beside y's loop
        y = hw.map(n, lambda i: al[i] * 3 + 1)
        s = hw.psum(y, "x")
        return hw.map(n, lambda j: s[j] + g[j] + g[j + 3 * n])

    return hw.shard_map(body, mesh=RING4, in_specs=(hw.P("x"), hw.P("x")), out_specs=hw.P("x"))(a, b)


def test_a_collective_that_needs_nothing_computed_runs_beside_the_first_loop():
    root = gather_beside_sum.elaborate().program.root
    first = root.stages[0]
    assert isinstance(first, Parallel)
    assert [type(c).__name__ for c in first.children] == ["Loop", "Collective"]
    assert isinstance(root.stages[1], Collective)  # the psum needs y: after it


@pytest.mark.rtl
def test_overlapped_collectives_keep_results_and_the_predicted_cycles():
    a, b = some(4 * OVERLAP_N, 8), some(4 * OVERLAP_N, 9)
    sim = gather_beside_sum.verify(a, b, dram=hw.DramConfig(latency=31))
    assert sim.cycles == sim.predicted_cycles
    sim = gather_beside_sum.verify(a, b, dram=hw.DramConfig(latency=17, jitter=9), seed=3)  # results only


@pytest.mark.rtl
def test_collective_matmul_hides_each_permute_behind_a_partial_matmul():
    """PE 0's measured timeline: each ppermute starts with the partial matmul of its level and
    ends before it; the whole run is faster than all-gather-then-matmul."""
    from test_mesh_patterns import load

    app, kernel = load("collective_matmul")
    a, b = app.inputs(1)
    sim = kernel.simulate(a, b, monitor=True)
    np.testing.assert_array_equal(sim.outputs, app.reference(a, b))
    assert sim.cycles == sim.predicted_cycles
    levels = [s for s in sim.design.program.root.stages if isinstance(s, Parallel)]
    assert len(levels) == app.P - 1
    for level in levels:
        coll, work = level.children[0], level.children[1]
        assert isinstance(coll, Collective)
        (c_go, c_done), (w_go, w_done) = sim.timeline[coll.name][0], sim.timeline[work.name][0]
        assert c_go == w_go and c_done < w_done
    assert sim.cycles < app.gathered.simulate(a, b).cycles


def test_a_mesh_timeline_names_only_the_pes_controllers():
    with pytest.raises(hw.HwgenError) as e:
        gather_beside_sum.simulate(some(4 * OVERLAP_N, 0), some(4 * OVERLAP_N, 1), monitor=["pipe9"])  # L:mon
    assert e.value.line == markers.line_of(HERE, "mon")
    assert e.value.message.startswith(
        "monitor names 'pipe9', which kernel 'gather_beside_sum' does not have; its controllers: coll0, coll1, "
    )
