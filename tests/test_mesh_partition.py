"""Global-view mesh kernels (`@hw.kernel(mesh=, in_shardings=, out_shardings=)`): the program
is written for whole arrays and partitioned into a shard_map with collectives. The
partitioned program's golden model equals the global one for every sharding (fast, no
Verilator), the choices are GSPMD's (no communication, all-reduce, reduce-scatter,
all-gather), and the hardware is bit-exact in the predicted cycles."""

import re

import numpy as np
import pytest

import hwgen as hw
from hwgen import int32, interp
from hwgen.mesh.partition import partition
from hwgen.mesh.spmd import collectives_in_order

RNG = np.random.default_rng(11)
MESH = hw.Mesh((2, 2), ("x", "y"))
M, K, N = 16, 8, 16


def wide(*shape):
    return RNG.integers(-(2**31), 2**31, size=shape, dtype=np.int64).astype(np.int32)


def matmul(ins, out, **options):
    @hw.kernel(mesh=MESH, in_shardings=ins, out_shardings=out, link=hw.LinkConfig(latency=3), **options)
    def mm(a: hw.Array[int32, M, K], b: hw.Array[int32, K, N]):
        return a @ b

    return mm


def partitioned(kernel, *args):
    """The partitioned program's golden result, and its collectives' kinds."""
    prog = partition(kernel, "partition")
    values = dict(zip((p.name for p in kernel.params), args))
    (got,) = interp.run([prog.results[0].node], values)
    sm = prog.results[0].node.shard_map
    return got, [c.kind for c in collectives_in_order(sm.body)], sm


X, Y, XY = hw.P("x", None), hw.P(None, "y"), hw.P(None, ("x", "y"))


@pytest.mark.parametrize(
    "ins, out, kinds, placed",
    [
        ((X, Y), hw.P("x", "y"), [], ("P('x')", "P(None, 'y')")),  # rows by columns: no communication
        ((hw.P(None, "x"), hw.P("x", None)), None, ["psum"], ("P(None, 'x')", "P('x')")),  # contraction split
        ((XY, hw.P(("x", "y"), None)), hw.P(("y", "x"), None), ["psum_scatter"], None),  # then scattered
        ((X, hw.P()), None, [], ("P('x')", "P()")),  # a replicated operand stays whole
        ((hw.P(), hw.P()), hw.P("y", "x"), [], ("P('y')", "P(None, 'x')")),  # placed as read (a free slice)
        ((X, hw.P()), hw.P(), ["all_gather"], None),  # computed split, gathered for a replicated result
    ],
)
def test_a_matmul_partitions_as_gspmd_does_and_keeps_its_result(ins, out, kinds, placed):
    k = matmul(ins, out)
    a, b = wide(M, K), wide(K, N)
    got, found, sm = partitioned(k, a, b)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(got, a @ b)
    np.testing.assert_array_equal(got, k(a, b))
    assert found == kinds
    if placed:
        assert tuple(repr(s) for s in sm.in_specs) == placed


def test_elementwise_work_after_a_split_contraction_reads_its_all_reduce():
    @hw.kernel(mesh=MESH, in_shardings=(hw.P(None, "x"), hw.P("x", None), hw.P("y", None)))
    def affine(a: hw.Array[int32, M, K], b: hw.Array[int32, K, N], c: hw.Array[int32, M, N]):
        return hw.map((M, N), lambda i, j: hw.sum(K, lambda k: a[i, k] * b[k, j]) * 3 + c[i, j])

    a, b, c = wide(M, K), wide(K, N), wide(M, N)
    got, kinds, sm = partitioned(affine, a, b, c)
    np.testing.assert_array_equal(got, affine(a, b, c))
    assert kinds == ["psum"] and repr(sm.out_specs[0]) == "P('y')"


def test_the_result_split_follows_consumers_back_to_producers():
    """(a @ b) + c with c split by rows over x: the matmul is computed split the same way."""

    @hw.kernel(mesh=MESH, in_shardings=(hw.P(), hw.P(), hw.P("x", None)))
    def chain(a: hw.Array[int32, M, K], b: hw.Array[int32, K, N], c: hw.Array[int32, M, N]):
        return a @ b + c

    a, b, c = wide(M, K), wide(K, N), wide(M, N)
    got, kinds, sm = partitioned(chain, a, b, c)
    np.testing.assert_array_equal(got, chain(a, b, c))
    assert kinds == [] and repr(sm.in_specs[0]) == "P('x')"


RING2 = hw.Mesh((2,), ("x",))


def _index_as_value():
    @hw.kernel(mesh=RING2, in_shardings=(hw.P("x"),))
    def k(a: hw.Array[int32, 8]):
        return hw.map(8, lambda i: hw.where(i == 0, 0, a[i] + i))

    return k


def _reversed_read():
    @hw.kernel(mesh=RING2, in_shardings=(hw.P("x"), hw.P("x")))
    def k(a: hw.Array[int32, 8], b: hw.Array[int32, 8]):
        return a[::-1] + b

    return k


def _part_of_a_dimension():
    @hw.kernel(mesh=RING2, in_shardings=(hw.P("x"), hw.P("x")))
    def k(a: hw.Array[int32, 16], b: hw.Array[int32, 8]):
        return a[8:] + b + hw.map(8, lambda i: a[i])

    return k


def _argmax():
    @hw.kernel(mesh=RING2, in_shardings=(hw.P("x"),))
    def k(a: hw.Array[int32, 8]):
        return hw.map(1, lambda z: hw.argmax(a))

    return k


def _sums_sharing_index_names():
    @hw.kernel(mesh=RING2, in_shardings=(hw.P("x"),))
    def k(a: hw.Array[int32, 8, 4, 8]):
        return a.sum(axis=2).sum(axis=0)

    return k


def _shared_names_and_a_bool_max():
    @hw.kernel(mesh=RING2, in_shardings=(hw.P("x", None), hw.P()))
    def k(a: hw.Array[int32, 8, 8], b: hw.Array[int32, 8, 8]):
        return a.sum(axis=0) + (b > 0).max(axis=0)

    return k


def _two_layers():
    @hw.kernel(mesh=RING2, in_shardings=(hw.P(), hw.P(), hw.P(None, "x")))
    def k(a: hw.Array[int32, 8, 8], b: hw.Array[int32, 8, 8], d: hw.Array[int32, 8, 8]):
        return (a @ b) @ d

    return k


def _diagonal():
    @hw.kernel(mesh=RING2, in_shardings=(hw.P("x"),))
    def k(a: hw.Array[int32, 8, 8]):
        return hw.map(8, lambda i: a[i, i])

    return k


@pytest.mark.parametrize(
    "make",
    [
        _index_as_value,
        _reversed_read,
        _part_of_a_dimension,
        _argmax,
        _sums_sharing_index_names,
        _shared_names_and_a_bool_max,
        _two_layers,
        _diagonal,
    ],
)
def test_indices_that_need_their_global_value_stay_whole(make):
    """An index used as a value, in an affine subscript, over part of a dimension or twice in
    one read is not split (each PE would need its offset), and maps that share index names
    ('@0', '@r0', '@i', ...) each decide their own: the partitioned program keeps the result."""
    k = make()
    args = [wide(*p.shape) for p in k.params]
    got, _, sm = partitioned(k, *args)
    np.testing.assert_array_equal(got, k(*args))
    for spec in sm.in_specs:  # every placement is a valid spec: no axis twice
        assert len(spec.axes()) == len(set(spec.axes()))


def test_a_reduction_read_split_is_reduce_scattered():
    """w - (x^T err): the sum over the samples (split over x) is computed for every weight,
    then reduce-scattered along the weights, which w's placement splits over x too."""

    @hw.kernel(mesh=RING2, in_shardings=(hw.P("x"), hw.P("x"), hw.P("x")))
    def update(x: hw.Array[int32, 8, 4], err: hw.Array[int32, 8], w: hw.Array[int32, 4]):
        return hw.map(4, lambda e: w[e] - hw.sum(8, lambda j: x[j, e] * err[j]))

    args = (wide(8, 4), wide(8), wide(4))
    got, kinds, sm = partitioned(update, *args)
    np.testing.assert_array_equal(got, update(*args))
    assert kinds == ["psum_scatter"] and repr(sm.out_specs[0]) == "P('x')"


def test_a_sharding_constraint_picks_the_split_of_an_intermediate():
    @hw.kernel(mesh=MESH)
    def chain(a: hw.Array[int32, M, K], b: hw.Array[int32, K, N], c: hw.Array[int32, M, N]):
        h = hw.with_sharding_constraint(a @ b, hw.P("y", None))
        return h + c

    a, b, c = wide(M, K), wide(K, N), wide(M, N)
    got, kinds, sm = partitioned(chain, a, b, c)
    np.testing.assert_array_equal(got, chain(a, b, c))
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(got, a @ b + c)
    assert kinds == [] and [repr(p) for p in sm.in_specs] == ["P('y')", "P()", "P('y')"]

    with pytest.raises(hw.HwgenError) as e:

        @hw.kernel
        def alone(a: hw.Array[int32, 8]):
            return hw.with_sharding_constraint(a, hw.P("x")) + 1  # L:no-mesh

    assert "declare the kernel with @hw.kernel(mesh=...)" in e.value.message
    assert open(__file__).read().splitlines()[e.value.line - 1].endswith("# L:no-mesh")


def test_what_is_not_partitioned_yet_is_refused_with_the_users_line():
    """b's 4 blocks over y become the 2 over x that a + b reads by an all-gather and a local
    slice (on a 2x2 mesh, 2 blocks each way, a permute moves them); splits of two dimensions
    that both change are refused at the kernel's line, and its golden model still works."""

    wide = hw.Mesh((2, 4), ("x", "y"))

    @hw.kernel(mesh=wide, in_shardings=(hw.P("x"), hw.P("y")), out_shardings=hw.P("x"))
    def add(a: hw.Array[int32, 64], b: hw.Array[int32, 64]):
        return a + b

    square = hw.kernel(mesh=MESH, in_shardings=(hw.P("x"), hw.P("y")), out_shardings=hw.P("x"))(add.fn)
    assert [c["kind"] for c in square.elaborate().report["collectives"]] == ["permute"]
    assert [c["kind"] for c in add.elaborate().report["collectives"]] == ["all_gather"]

    @hw.kernel(mesh=wide, in_shardings=(hw.P("x", "y"), hw.P("y", "x")))  # L:moved
    def both(a: hw.Array[int32, 8, 8], b: hw.Array[int32, 8, 8]):
        return a + b

    with pytest.raises(hw.UnsupportedError) as e:
        both.elaborate()
    assert "the argument 'b' is split as hw.P('y', 'x') but read as hw.P('x', 'y')" in e.value.message
    assert e.value.message.endswith("the golden model both(*arrays) works")
    assert e.value.file == __file__ and open(__file__).read().splitlines()[e.value.line - 1].endswith("# L:moved")
    ones = np.ones((8, 8), np.int32)
    np.testing.assert_array_equal(both(ones, ones), 2 * ones)
    assert "not partitioned: " in both.show_ir()


def test_shardings_are_checked_when_the_kernel_is_made():
    def make(ins=None, out=None, mesh=MESH):
        @hw.kernel(mesh=mesh, in_shardings=ins, out_shardings=out)  # L:made
        def k(a: hw.Array[int32, 6, 4]):
            return a + 1

        return k

    with pytest.raises(hw.HwgenError, match=r"in_shardings must be a tuple of one hw.P per parameter \(1\)") as e:
        make(ins=(hw.P(), hw.P()))
    assert open(__file__).read().splitlines()[e.value.line - 1].endswith("# L:made")
    with pytest.raises(hw.HwgenError, match="splits dimension 0 of size 6 over 4 PEs"):
        make(ins=hw.P(("x", "y")))
    with pytest.raises(hw.HwgenError, match="out_shardings P\\('z'\\) names mesh axis 'z'"):
        make(out=hw.P("z"))
    with pytest.raises(hw.HwgenError, match="they need mesh= too"):
        make(ins=hw.P("x"), mesh=None)


def _read_two_ways():
    @hw.kernel(mesh=RING2, in_shardings=(hw.P(), hw.P(None, "x")))  # L:two-ways
    def k(a: hw.Array[int32, 4, 8], b: hw.Array[int32, 4, 8]):
        return hw.map((4, 8), lambda i, j: a[i, j] + b[i, j]) + hw.map((4, 8), lambda r, s: a[3 - r, 7 - s])

    return k


def _placed_otherwise():
    ins = (hw.P("x", None), hw.P(None, "x"))

    @hw.kernel(mesh=MESH, in_shardings=ins, out_shardings=hw.P("x", "y"))  # L:otherwise
    def k(b: hw.Array[int32, 8, 8], a: hw.Array[int32, 8, 8]):
        return hw.map((8, 8), lambda i, j: b[i, j] + a[i, j])

    return k


def _result_sliced():
    @hw.kernel(mesh=RING2, out_shardings=hw.P("x"))
    def k(a: hw.Array[int32, 8]):
        return hw.map(8, lambda i: a[7 - i] + 1)  # L:sliced

    return k


def _gather_dimension_1():
    @hw.kernel(mesh=RING2, in_shardings=(hw.P(None, "x"),))
    def k(a: hw.Array[int32, 4, 8]):
        return hw.map((4, 8), lambda i, j: a[i, 7 - j])

    return k


@pytest.mark.rtl
def test_an_argument_split_along_dimension_1_and_needed_whole_is_gathered_along_it():
    """a's columns over x, read reversed along them: an all-gather along dimension 1 (built
    between local transposes, mesh/dim0.py), then every PE computes the whole result."""
    k = _gather_dimension_1()
    a = np.arange(32, dtype=np.int32).reshape(4, 8) * 7 - 50
    sim = k.verify(a)
    np.testing.assert_array_equal(sim.outputs, a[:, ::-1])
    assert sim.cycles == sim.predicted_cycles
    assert [c["kind"] for c in sim.design.report["collectives"]] == ["all_gather"]


def _to_one_value():
    @hw.kernel(mesh=RING2, in_shardings=(hw.P("x"),))
    def k(a: hw.Array[int32, 8]):
        return hw.map(1, lambda z: hw.sum(8, lambda i: a[i]) + 1)  # L:one-value

    return k


def _split_by_other_axes():
    @hw.kernel(mesh=hw.Mesh((2, 4), ("x", "y")), in_shardings=(hw.P("y", "x"), hw.P("x", "y")))
    def k(a: hw.Array[int32, 8, 8], b: hw.Array[int32, 8, 8]):
        c = hw.map((8, 8), lambda i, j: a[i, j] * 3)
        return hw.map((8, 8), lambda r, s: c[r, s] + b[r, s])  # L:other-axes

    return k


def _slice_off_the_beat():
    @hw.kernel(mesh=hw.Mesh((4,), ("x",), topology="ring"), in_shardings=(hw.P("x"), hw.P()))  # L:off-beat
    def k(a: hw.Array[int32, 4, 4], b: hw.Array[int32, 4, 2]):
        c = a @ b
        return c.T @ b  # b's rows split (one row of 2 words a PE) and whole

    return k


def _multifold():
    @hw.kernel(mesh=RING2)
    def k(a: hw.Array[int32, 8]):
        return hw.multifold(8, hw.zeros(4, int32), lambda i: (i % 4, a[i])) + 1  # L:multifold

    return k


def _count():
    @hw.kernel(mesh=RING2)
    def k(a: hw.Array[int32, 8]):
        _, n = hw.filter(8, lambda i: a[i] > 0)
        return hw.map(8, lambda j: a[j] + n)  # L:count

    return k


def _bool_result():
    @hw.kernel(mesh=RING2)  # L:bool
    def k(a: hw.Array[int32, 8]):
        return a > 0

    return k


def _two_constraints():
    @hw.kernel(mesh=MESH)
    def k(a: hw.Array[int32, 8, 8], b: hw.Array[int32, 8, 8]):
        h = a @ b
        one = hw.with_sharding_constraint(h, hw.P("x"))
        two = hw.with_sharding_constraint(h, hw.P(None, "x"))  # L:twice
        return one + two

    return k


def _unmet_constraint():
    @hw.kernel(mesh=RING2)
    def k(a: hw.Array[int32, 8]):
        return hw.with_sharding_constraint(hw.map(8, lambda i: a[7 - i]), hw.P("x")) + 1  # L:unmet

    return k


@pytest.mark.parametrize(
    "make, why, marker",
    [
        (
            _read_two_ways,
            "the argument 'a' is read as hw.P(None, 'x') and replicated; placing it needs one way",
            "two-ways",
        ),
        (
            _placed_otherwise,
            "the argument 'a' is placed hw.P(None, 'x') but read as hw.P('x', 'y'); give it in_shardings "
            "hw.P('x', 'y')",
            "otherwise",
        ),
        (
            _result_sliced,
            "the result is computed as replicated, which out_shardings hw.P('x') would slice (not built yet: "
            "give out_shardings hw.P(), as computed)",
            "sliced",
        ),
        (_to_one_value, "a reduction over split indices to a single value is not built yet", "one-value"),
        (
            _split_by_other_axes,
            "the argument 'b' is split as hw.P('x', 'y') but read as hw.P('y', 'x'); moving blocks between these "
            "splits is not built yet (an all-to-all moves the split of one dimension to another that is not split; "
            "a permute, to as many blocks over other axes; a gather, where the read splits less; a gather and a "
            "slice, rows into another number of blocks)",
            "other-axes",
        ),
        (
            _slice_off_the_beat,
            "the rows PE 1 reads of the argument 'b' (a hw.roll of it, or its local slice where it is read split "
            "and whole) start at word 2, which is not a whole DRAM beat (4 words)",
            "off-beat",
        ),
        (_multifold, "hw.multifold is not partitioned yet", "multifold"),
        (_count, "a count of a group-by, filter or flatmap is not partitioned yet", "count"),
        (_bool_result, "the result must be integers, not bool_ (convert it with .astype)", "bool"),
        (_two_constraints, "one array has two different hw.with_sharding_constraint", "twice"),
        (
            _unmet_constraint,
            "hw.with_sharding_constraint asks for hw.P('x'), but the array can only be computed as replicated",
            "unmet",
        ),
    ],
)
def test_every_refusal_of_the_partitioner_says_why_and_where(make, why, marker):
    k = make()
    with pytest.raises(hw.UnsupportedError) as e:
        k.elaborate()
    assert e.value.message.startswith(f"cannot elaborate kernel 'k' on mesh {k.mesh.describe()}: {why}")
    assert e.value.message.endswith("the golden model k(*arrays) works")
    assert e.value.file == __file__ and open(__file__).read().splitlines()[e.value.line - 1].endswith(f"# L:{marker}")


def test_shardings_and_constraints_in_the_wrong_place_are_errors():
    with pytest.raises(hw.ScheduleError, match="a kernel that calls hw.shard_map gives in_specs") as e:

        @hw.kernel(mesh=RING2, in_shardings=(hw.P("x"),))  # L:with-shard-map
        def k(a: hw.Array[int32, 8]):
            return hw.shard_map(lambda b: hw.psum(b, "x"), mesh=RING2, in_specs=hw.P("x"), out_specs=hw.P())(a)

    assert open(__file__).read().splitlines()[e.value.line - 1].endswith("# L:with-shard-map")
    with pytest.raises(hw.ScheduleError, match="out_shardings is one hw.P: the kernel must return one array"):

        @hw.kernel(mesh=RING2, out_shardings=hw.P("x"))
        def two(a: hw.Array[int32, 8]):
            return a + 1, a + 2

    with pytest.raises(hw.ScheduleError, match="is for programs written for whole arrays, not with hw.shard_map") as e:

        @hw.kernel(mesh=RING2)
        def mixed(a: hw.Array[int32, 8]):
            placed = hw.with_sharding_constraint(a + 1, hw.P("x"))  # L:mixed
            return hw.shard_map(lambda b: hw.psum(b, "x"), mesh=RING2, in_specs=hw.P("x"), out_specs=hw.P())(placed)

    assert open(__file__).read().splitlines()[e.value.line - 1].endswith("# L:mixed")
    with pytest.raises(hw.TypeMismatchError, match=r"hw.with_sharding_constraint P\(None, 'x'\) has 2 entries") as e:

        @hw.kernel(mesh=RING2)
        def rank(a: hw.Array[int32, 8]):
            return hw.with_sharding_constraint(a + 1, hw.P(None, "x"))  # L:rank

    assert open(__file__).read().splitlines()[e.value.line - 1].endswith("# L:rank")
    with pytest.raises(hw.TraceError, match="inside a hw.shard_map body each PE's block is already placed") as e:

        @hw.kernel(mesh=RING2)
        def in_body(a: hw.Array[int32, 8]):
            body = lambda b: hw.with_sharding_constraint(b, hw.P("x"))  # noqa: E731  # L:in_body
            return hw.shard_map(body, mesh=RING2, in_specs=hw.P("x"), out_specs=hw.P("x"))(a)

    assert open(__file__).read().splitlines()[e.value.line - 1].endswith("# L:in_body")
    for value, spec, why in (
        (3, hw.P(), "hw.with_sharding_constraint needs an array, got"),
        (None, "x", "hw.with_sharding_constraint needs an hw.P(...), got 'x'"),
    ):
        with pytest.raises(hw.TraceError, match=re.escape(why)):

            @hw.kernel(mesh=RING2)
            def wrong(a: hw.Array[int32, 8]):
                return a + hw.with_sharding_constraint(a if value is None else value, spec)

    with pytest.raises(hw.TraceError, match="hw.with_sharding_constraint can only be used inside an @hw.kernel"):
        hw.with_sharding_constraint(np.zeros(4, np.int32), hw.P())


def test_a_schedule_is_checked_against_the_extents_on_each_pe():
    k = matmul((XY, hw.P(("x", "y"), None)), None, tile={"@k": 4})  # K = 8 over 4 PEs: 2 each
    with pytest.raises(hw.ScheduleError, match="does not divide its extent 2 on each PE"):
        k.elaborate()


@pytest.mark.rtl
@pytest.mark.parametrize(
    "ins, out",
    [
        ((hw.P(None, "x"), hw.P("x", None)), None),
        ((XY, hw.P(("x", "y"), None)), hw.P(("y", "x"), None)),
        ((X, hw.P()), hw.P()),
    ],
)
def test_partitioned_matmuls_in_hardware(ins, out):
    k = matmul(ins, out, tile={"@i": 8, "@j": 8, "@k": 2})
    a, b = wide(M, K), wide(K, N)
    sim = k.verify(a, b)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(sim.outputs, a @ b)
    assert sim.cycles == sim.predicted_cycles


RING4 = hw.Mesh((4,), ("x",), topology="ring")


def gather_then_matmul(mode, **options):
    """a's rows over x, b's (larger) columns over x: a is all-gathered into the contraction."""

    @hw.kernel(
        mesh=RING4,
        in_shardings=(hw.P("x", None), hw.P(None, "x")),
        out_shardings=hw.P(None, "x"),
        tile={"@i": 16, "@j": 16, "@k": 16},
        par={"@j": 16},
        link=hw.LinkConfig(latency=4),
        collective_matmul=mode,
        **options,
    )
    def mm(a: hw.Array[int32, 64, 32], b: hw.Array[int32, 32, 128]):
        return a @ b

    return mm


def test_an_all_gather_feeding_a_matmul_becomes_collective_matmul_when_the_model_says_so():
    """'auto' compares both plans' predicted cycles; True and False force either; each
    partitioned golden model is a @ b."""
    kinds = {}
    for mode in ("auto", True, False):
        report = gather_then_matmul(mode).elaborate().report
        kinds[mode] = ([c["kind"] for c in report["collectives"]], report.get("collective_matmul", ""))
    assert kinds[False] == (["all_gather"], "")
    assert kinds[True] == (["permute"] * 3, "collective matmul (forced)")
    assert kinds["auto"][0] == ["permute"] * 3
    assert re.fullmatch(r"collective matmul: (\d+) predicted cycles against (\d+)", kinds["auto"][1])
    k = gather_then_matmul(True)
    a, b = wide(64, 32), wide(32, 128)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(k(a, b), a @ b)
    assert "roll(concatenate([" in k.show_ir() and "collective matmul: " in gather_then_matmul("auto").show_ir()


def test_collective_matmul_option_errors():
    with pytest.raises(hw.ScheduleError, match="collective_matmul must be 'auto', True or False, got 'yes'"):
        gather_then_matmul("yes")
    with pytest.raises(hw.ScheduleError, match="collective_matmul= chooses how a mesh kernel gathers; it needs mesh="):

        @hw.kernel(collective_matmul=True)
        def k(a: hw.Array[int32, 4]):
            return a + 1

    k = matmul((hw.P("x", None), hw.P(None, "y")), hw.P("x", "y"), collective_matmul=True)
    with pytest.raises(hw.UnsupportedError, match="its result is not a contraction reading an all-gather of rows"):
        k.elaborate()
    with pytest.raises(hw.ScheduleError, match="a hw.shard_map body writes collective matmul itself"):

        @hw.kernel(mesh=RING4, collective_matmul=False)
        def s(a: hw.Array[int32, 8]):
            return hw.shard_map(lambda al: al + 1, mesh=RING4, in_specs=hw.P("x"), out_specs=hw.P("x"))(a)


def test_collective_matmul_is_not_used_where_the_row_index_is_needed_elsewhere():
    """A row index also used as a value or in another read would need each step's global
    row: the partitioner keeps the plain all-gather, and the result is the global program's."""
    rows = [
        lambda a, b, c: hw.map((64, 128), lambda i, j: hw.sum(32, lambda k: a[i, k] * b[k, j]) + i),
        lambda a, b, c: hw.map((64, 128), lambda i, j: hw.sum(32, lambda k: a[i, k] * b[k, j]) + c[63 - i]),
    ]
    for make in rows:

        @hw.kernel(
            mesh=RING4,
            in_shardings=(hw.P("x", None), hw.P(None, "x"), hw.P()),
            out_shardings=hw.P(None, "x"),
        )
        def k(a: hw.Array[int32, 64, 32], b: hw.Array[int32, 32, 128], c: hw.Array[int32, 64]):
            return make(a, b, c)

        assert partition(k, "partition", windowed=True) is None
        a, b, c = wide(64, 32), wide(32, 128), wide(64)
        got, kinds, _ = partitioned(k, a, b, c)
        assert kinds == ["all_gather"]
        np.testing.assert_array_equal(got, k(a, b, c))


@pytest.mark.rtl
def test_collective_matmul_chosen_by_the_partitioner_in_hardware():
    a, b = wide(64, 32), wide(32, 128)
    cycles = {}
    for mode in ("auto", False):
        sim = gather_then_matmul(mode).verify(a, b)
        with np.errstate(over="ignore"):
            np.testing.assert_array_equal(sim.outputs, a @ b)
        assert sim.cycles == sim.predicted_cycles
        cycles[mode] = sim.cycles
    assert cycles["auto"] < cycles[False]


def test_a_square_gathered_matmul_follows_the_operand_split_as_its_result():
    """a's rows and b's columns over x, c's columns over x, all arrays of one size: of the two
    reads that vote, b's (split as c is) goes first, so c is computed by columns and a is
    gathered (before, a's vote won and b had to be gathered along dimension 1: refused)."""
    for mode, kinds in ((False, ["all_gather"]), (True, ["permute"] * 3)):

        @hw.kernel(
            mesh=RING4,
            in_shardings=(hw.P("x", None), hw.P(None, "x")),
            out_shardings=hw.P(None, "x"),
            tile={"@i": 16, "@j": 16, "@k": 16},
            collective_matmul=mode,
        )
        def square(a: hw.Array[int32, 64, 64], b: hw.Array[int32, 64, 64]):
            return a @ b

        report = square.elaborate().report
        assert [c["kind"] for c in report["collectives"]] == kinds
        assert report["in_specs"] == {"a": "P('x')", "b": "P(None, 'x')"}


@pytest.mark.rtl
def test_an_argument_read_split_and_whole_stays_whole_and_each_pe_reads_its_rows_in_place():
    """GSPMD's free local slice: b is placed whole (a @ b reads it so); c.T @ b contracts
    over c's rows, split over x, so it reads b's rows split: each PE its rows of its copy,
    where they lie (an array of the PE program inside b, at a per-PE place), then psum."""

    @hw.kernel(mesh=RING4, in_shardings=(hw.P("x"), hw.P()), tile={"@i": 4})
    def k(a: hw.Array[int32, 16, 16], b: hw.Array[int32, 16, 16]):
        c = a @ b
        return c.T @ b

    a, b = wide(16, 16) % 1000, wide(16, 16) % 1000
    sim = k.verify(a, b)
    c = a.astype(np.int64) @ b
    np.testing.assert_array_equal(sim.outputs, (c.T @ b).astype(np.int32))
    assert sim.cycles == sim.predicted_cycles
    assert [c["kind"] for c in sim.design.report["collectives"]] == ["all_reduce"]
    assert sim.design.plan.aliases == {"b_slice": ("b", (0, 64, 128, 192))}


def test_axes_of_one_pe_split_nothing_so_nothing_moves():
    @hw.kernel(mesh=hw.Mesh((4, 1), ("x", "z")), in_shardings=(hw.P(("x", "z")), hw.P("x")))
    def k(a: hw.Array[int32, 16, 16], b: hw.Array[int32, 16, 16]):
        c = hw.map((16, 16), lambda i, j: a[i, j] * 3)
        return hw.map((16, 16), lambda r, s: c[r, s] - b[r, s])

    assert k.elaborate().report["collectives"] == []


@pytest.mark.rtl
def test_a_result_computed_by_rows_over_x_and_wanted_over_y_moves_by_a_permute():
    @hw.kernel(mesh=MESH, in_shardings=(hw.P("x"),), out_shardings=hw.P("y"), tile={"i": 4})
    def k(a: hw.Array[int32, 16, 16]):
        return hw.map((16, 16), lambda i, j: a[i, j] * 3)

    a = wide(16, 16)
    sim = k.verify(a)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(sim.outputs, a * 3)
    assert sim.cycles == sim.predicted_cycles
    assert [c["kind"] for c in sim.design.report["collectives"]] == ["permute"]
    assert sim.design.report["out_spec"] == "P('y')"


@pytest.mark.rtl
def test_a_permute_leaves_out_axes_of_one_pe():
    """On a 2x1x2 mesh, rows split over (z, y) are moved to rows over x, and a result
    computed as P('x', 'z') is wanted as P('z', ('x', 'y')): y splits nothing, so each is a
    permute over x and z only (a collective runs over axes of at least 2 PEs)."""
    mesh = hw.Mesh((2, 1, 2), ("x", "y", "z"))

    @hw.kernel(mesh=mesh, in_shardings=(hw.P(("z", "y")),), out_shardings=hw.P("x"), tile={"i": 4})
    def rows(a: hw.Array[int32, 16, 16]):
        return hw.map((16, 16), lambda i, j: a[i, j] * 3)

    @hw.kernel(mesh=mesh, in_shardings=(hw.P("x", "z"),), out_shardings=hw.P("z", ("x", "y")), tile={"r": 4})
    def blocks(a: hw.Array[int32, 16, 16]):
        return hw.map((16, 16), lambda r, s: a[r, s] - 7)

    a = wide(16, 16)
    for k, want in ((rows, a * 3), (blocks, a - 7)):
        sim = k.verify(a)
        np.testing.assert_array_equal(sim.outputs, want)
        assert sim.cycles == sim.predicted_cycles
        assert [(c["kind"], c["axes"]) for c in sim.design.report["collectives"]] == [("permute", ["x", "z"])]


@pytest.mark.rtl
def test_a_result_computed_by_rows_and_wanted_by_columns_moves_by_an_all_to_all():
    """GSPMD's resharding: c is computed split like a (rows over x); out_shardings wants its
    columns over x, so an all-to-all (split along 1, concatenated along 0) moves the blocks."""

    @hw.kernel(mesh=RING4, in_shardings=(hw.P("x", None),), out_shardings=hw.P(None, "x"), tile={"i": 4, "j": 16})
    def reshard(a: hw.Array[int32, 16, 16]):
        return hw.map((16, 16), lambda i, j: a[i, j] * 3 + 1)

    a = wide(16, 16)
    with np.errstate(over="ignore"):
        want = a * 3 + 1
    sim = reshard.verify(a)
    np.testing.assert_array_equal(sim.outputs, want)
    assert sim.cycles == sim.predicted_cycles
    assert [c["kind"] for c in sim.design.report["collectives"]] == ["all_to_all"]
    assert sim.design.report["out_spec"] == "P(None, 'x')"


def test_only_the_votes_that_agree_with_out_shardings_go_first():
    """b (as large as a) votes k <- x and j <- y; only j <- y agrees with out_shardings, so
    only it goes before a's i <- x: c is computed by rows over x and columns over y, a and b
    gathered along dimension 0 (b's k <- x going first too would leave a unreadable)."""

    @hw.kernel(
        mesh=MESH,
        in_shardings=(hw.P("x", None), hw.P("x", "y")),
        out_shardings=hw.P(None, "y"),
        collective_matmul=False,
        tile={"@i": 8, "@j": 8, "@k": 8},
    )
    def k(a: hw.Array[int32, 16, 16], b: hw.Array[int32, 16, 16]):
        return a @ b

    report = k.elaborate().report
    assert [(c["kind"], c["axes"]) for c in report["collectives"]] == [("all_gather", ["x"]), ("all_gather", ["x"])]
