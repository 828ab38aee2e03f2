"""A shard_map body reading its argument block rolled by hw.axis_index: each PE reads its
rows of it where they lie (mesh/slices.py), and what cannot be read so is refused."""

import markers
import numpy as np
import pytest

import hwgen as hw
from hwgen import int32

RING4 = hw.Mesh((4,), ("x",), topology="ring")
TAIL = (
    ". Mesh hardware supports one hw.shard_map whose body computes an integer array from its blocks with "
    "hw.psum / hw.pmax / hw.pmin / hw.psum_scatter / hw.all_gather / hw.ppermute / hw.all_to_all of integer "
    "arrays along the way (see docs/mesh.md); the golden model k(*arrays) works"
)


def rows_of(read, shift, words=4):
    """A ring-of-4 kernel whose body rolls its (replicated) 32 x `words` block by `shift(al)`
    and reads it by `read(s, i, j)` over 8 rows."""

    @hw.kernel(mesh=RING4, tile={"i": 8})
    def k(a: hw.Array[int32, 32, words]):
        def body(al):
            s = hw.roll(al, shift(al), axis=0)  # L:roll
            return hw.map((8, words), lambda i, j: read(s, i, j))

        return hw.shard_map(body, mesh=RING4, in_specs=hw.P(), out_specs=hw.P("x"))(a)

    return k


@pytest.mark.rtl
def test_each_pe_reads_its_rows_of_a_rolled_argument_in_place():
    k = rows_of(lambda s, i, j: s[i, j] * 2 + i, lambda al: -hw.axis_index("x") * 8)
    a = np.random.default_rng(3).integers(-(2**20), 2**20, (32, 4)).astype(np.int32)
    want = a * 2 + np.tile(np.arange(8), 4)[:, None]
    np.testing.assert_array_equal(k(a), want)  # the golden model
    sim = k.verify(a)
    np.testing.assert_array_equal(sim.outputs, want)
    assert sim.cycles == sim.predicted_cycles
    assert sim.design.plan.aliases == {"a_slice": ("a", (0, 32, 64, 96))}  # rows 8k on, 4 words each


@pytest.mark.parametrize(
    "read, shift, words, marker, why",
    [
        (
            lambda s, i, j: s[i, j],
            lambda al: -hw.axis_index("x") * 8 + 4,
            4,
            "roll",
            "the rows of a rolled array read on PE 0 (28 to 35 of 32) wrap round its end; roll it by whole "
            "blocks that the reads stay in",
        ),
        (
            lambda s, i, j: s[i, j],
            lambda al: -hw.axis_index("x") * 3,
            1,
            "roll",
            "the rows PE 1 reads of the argument 'a' (a hw.roll of it, or its local slice where it is read split "
            "and whole) start at word 3, which is not a whole DRAM beat (4 words)",
        ),
        (
            lambda s, i, j: s[i, j],
            lambda al: al[0, 0],
            4,
            "roll",
            "the shift of hw.roll must be computed from hw.axis_index and constants",
        ),
    ],
)
def test_a_rolled_argument_that_cannot_be_read_in_place_is_refused(read, shift, words, marker, why):
    k = rows_of(read, shift, words)
    with pytest.raises(hw.HwgenError) as e:
        k.elaborate()
    message = f"cannot elaborate kernel 'k' on mesh 4 ring (x): {why}{TAIL}"
    markers.check_error(e.value, hw.UnsupportedError, message, __file__, marker)


@pytest.mark.rtl
def test_fixed_point_arrays_cross_the_mesh_as_their_raw_integers():
    """A fixed-point argument and result on a mesh: psum_scatter of fixed values is the
    wrapping sum of their raw integers (checked here in plain numpy on the raw values)."""
    f = hw.fixed(8, 8)

    @hw.kernel(mesh=RING4, tile={"i": 8})
    def k(a: hw.Array[f, 64]) -> hw.Array[f, 16]:
        def body(al):
            return hw.psum_scatter(hw.map(16, lambda i: al[i] * al[i] + 1), "x", tiled=True)

        return hw.shard_map(body, mesh=RING4, in_specs=hw.P("x"), out_specs=hw.P("x"))(a)

    a = np.random.default_rng(4).uniform(-3, 3, 64)
    raw = np.floor(a * 256).astype(np.int64).reshape(4, 16)
    square = ((raw * raw) >> 8) + 256  # the product rounded down, plus one
    total = square.sum(axis=0).astype(np.int16)  # wrapping to the 16-bit raw value
    want = total.astype(np.float64) / 256  # PE k keeps block k of the 4
    sim = k.verify(a)
    np.testing.assert_array_equal(sim.outputs, want)
    assert sim.cycles == sim.predicted_cycles


def _argument_to_psum(al):
    s = hw.roll(al, -hw.axis_index("x") * 8, axis=0)  # L:to-psum
    t = hw.psum(s, "x")
    return hw.map((8, 4), lambda i, j: s[i, j] + t[31 - i, j])


def _gathered_to_psum(al):
    s = hw.roll(hw.all_gather(al, "x", tiled=True), -hw.axis_index("x") * 8, axis=0)  # L:gathered
    return hw.psum(s, "x")


@pytest.mark.parametrize(
    "body, specs, named, marker",
    [
        (_argument_to_psum, (hw.P(), hw.P("x")), "the argument 'a'", "to-psum"),
        (_gathered_to_psum, (hw.P("x"), hw.P()), "the result of hw.all_gather", "gathered"),
    ],
)
def test_a_rolled_array_passed_to_a_collective_is_refused(body, specs, named, marker):
    """A collective (or a transpose before one) would move all the block's rows from where
    the PE's rolled rows start, past the array: only reads by index are built."""

    @hw.kernel(mesh=RING4)
    def k(a: hw.Array[int32, 32, 4]):
        return hw.shard_map(body, mesh=RING4, in_specs=specs[0], out_specs=specs[1])(a)

    with pytest.raises(hw.HwgenError) as e:
        k.elaborate()
    message = (
        "cannot elaborate kernel 'k' on mesh 4 ring (x): a rolled array may only be read by index (its rows "
        f"read stay where they lie); pass {named} itself to collectives and array operations{TAIL}"
    )
    markers.check_error(e.value, hw.UnsupportedError, message, __file__, marker)


@pytest.mark.rtl
def test_each_pe_reads_its_rows_of_a_rolled_all_gather_in_place():
    """The rows of a collective's result, rolled by the PE's index, are read where they lie
    too (the partitioner's gather-and-slice): the all-gather's result array, read from a
    per-PE place once the gather is done."""

    @hw.kernel(mesh=RING4, tile={"i": 4})
    def k(a: hw.Array[int32, 32, 4]):
        def body(al):  # al: this PE's 8 rows
            whole = hw.all_gather(al, "x", tiled=True)
            mine = hw.roll(whole, -((hw.axis_index("x") + 1) % 4) * 8, axis=0)  # the next PE's rows
            return hw.map((8, 4), lambda i, j: mine[i, j] - al[i, j])

        return hw.shard_map(body, mesh=RING4, in_specs=hw.P("x"), out_specs=hw.P("x"))(a)

    a = np.random.default_rng(4).integers(-(2**20), 2**20, (32, 4)).astype(np.int32)
    want = np.roll(a, -8, axis=0) - a
    np.testing.assert_array_equal(k(a), want)  # the golden model
    sim = k.verify(a)
    np.testing.assert_array_equal(sim.outputs, want)
    assert sim.cycles == sim.predicted_cycles
    assert sim.design.plan.aliases == {"collective0_slice": ("collective0", (32, 64, 96, 0))}
