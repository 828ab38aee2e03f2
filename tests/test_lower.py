"""The lowering to the loop IR keeps the golden model's answer, for every app and a range of
tile sizes (the loop IR is executed by its own numpy interpreter)."""

import numpy as np
import pytest
from conftest import PATTERNS, load_pattern

from hwgen import ir, loop_interp
from hwgen.lang.signature import check_args, to_user
from hwgen.loops import Load, Loop, Pipe, Store, show, walk
from hwgen.passes.lower import lower


def pipe_runs(prog) -> int:
    """How many times the loop program starts a pipe (the interpreter's cost)."""

    def go(c, trips):
        if isinstance(c, Pipe):
            return trips
        if isinstance(c, Loop):
            return sum(go(s, trips * c.iterations) for s in c.stages)
        return sum(go(s, trips) for s in getattr(c, "children", ()))

    return go(prog.root, 1)


def run_lowered(kernel, args, tiles, par=None):
    prog = lower(kernel.program, tiles, par)
    values = check_args(kernel.name, kernel.params, args)
    out = loop_interp.run(prog, values)
    results = [to_user(p, out[p.name]) for p in kernel.results]
    return results[0] if len(results) == 1 else tuple(results), prog


def tilings(kernel):
    """Tile every index of the kernel by each divisor of its extent up to 16 (the slice of a
    multifold always whole)."""
    ext = {n: e for n, e in kernel.program.extents.items() if not n.startswith("%")}
    whole = {
        d.name: d.extent
        for r in kernel.program.results
        for n in ir.walk(r.node)
        if isinstance(n, ir.MultiFold)
        for d in n.sdims
    }
    yield {}
    for size in (2, 4, 8, 16):
        yield {n: whole.get(n, size) for n, e in ext.items() if e % size == 0}
    yield {n: e for n, e in ext.items()}  # whole extents on chip


@pytest.mark.parametrize("name", PATTERNS)
def test_lowering_keeps_results(name):
    app = load_pattern(name)
    kernel = getattr(app, name)
    args = app.inputs(0)
    want = kernel(*args)
    for tiles in tilings(kernel):
        if pipe_runs(lower(kernel.program, tiles)) > 5000:
            continue  # too slow to interpret; smaller tiles of the same app are covered
        got, _ = run_lowered(kernel, args, tiles)
        for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
            np.testing.assert_array_equal(g, w, err_msg=str(tiles))


def test_baseline_structure_of_dotproduct():
    kernel = load_pattern("dotproduct").dotproduct
    prog = lower(kernel.program, {})
    loops = [c for c in walk(prog.root) if isinstance(c, Loop) and c.counters]
    assert [[k.name for k in c.counters] for c in loops] == [["i"]]
    loads = [c for c in walk(prog.root) if isinstance(c, Load)]
    assert sorted(c.dram.name for c in loads) == ["a", "b"] and all(c.mem.shape == (1,) for c in loads)
    pipes = [c for c in walk(prog.root) if isinstance(c, Pipe)]
    assert len(pipes) == 1 and pipes[0].counters == () and pipes[0].writes[0].op.op == "add"


def test_halo_reads_share_one_tile():
    import hwgen as hw

    @hw.kernel
    def smooth(x: hw.Array[hw.int32, 64]) -> hw.Array[hw.int32, 62]:
        return hw.map(62, lambda i: x[i] + x[i + 1] + x[i + 2])

    x = np.arange(64, dtype=np.int32) ** 2
    got, prog = run_lowered(smooth, (x,), {})
    np.testing.assert_array_equal(got, x[:-2] + x[1:-1] + x[2:])
    loads = [c for c in walk(prog.root) if isinstance(c, Load)]
    assert len(loads) == 1 and loads[0].mem.shape == (3,)
    got, prog = run_lowered(smooth, (x,), {"i": 31})
    np.testing.assert_array_equal(got, x[:-2] + x[1:-1] + x[2:])
    assert [c.mem.shape for c in walk(prog.root) if isinstance(c, Load)] == [(33,)]
    assert [c.shape for c in walk(prog.root) if isinstance(c, Store)] == [(31,)]


# ---------------------------------------------------------------- a helper traced twice

import hwgen as hw  # noqa: E402
from hwgen import int32  # noqa: E402

B, D = 8, 8


def mlp(layers: int):
    """`layers` stacked calls of one helper: each call re-traces the same lambdas (the same index
    names n, o, i), and each consumes the result of the one before."""

    @hw.kernel
    def stacked(x: hw.Array[int32, B, D], w: hw.Array[int32, layers, D, D]) -> hw.Array[int32, B, D]:
        def layer(h, s):
            return hw.map((B, D), lambda n, o: hw.maximum(hw.sum(D, lambda i: h[n, i] * w[s, i, o]) >> 6, 0))

        h = x
        for s in range(layers):
            h = layer(h, s)
        return h

    return stacked


def mlp_numpy(x, w):
    h = x.astype(np.int64)
    for s in range(w.shape[0]):
        h = np.maximum((h @ w[s]).astype(np.int32) >> 6, 0)
    return h.astype(np.int32)


def mlp_args(layers: int):
    rng = np.random.default_rng(0)
    return (rng.integers(-100, 100, (B, D)).astype(np.int32), rng.integers(-16, 16, (layers, D, D)).astype(np.int32))


@pytest.mark.parametrize("layers", [2, 3])
def test_helper_called_twice_keeps_its_loops_apart(layers):
    kernel = mlp(layers)
    x, w = mlp_args(layers)
    want = mlp_numpy(x, w)
    np.testing.assert_array_equal(kernel(x, w), want)  # the golden model
    for tiles in ({}, {"n": 4, "o": 4, "i": 2}, {"i": 8}, {"n": 8, "o": 2, "i": 4}):
        got, prog = run_lowered(kernel, (x, w), tiles)
        np.testing.assert_array_equal(got, want, err_msg=str(tiles))
        nested = [c for c in walk(prog.root) if isinstance(c, Loop) and any(isinstance(s, Loop) for s in c.stages)]
        for outer in nested:  # no loop nests a loop over a counter of the same name
            inner = {k.name for s in walk(outer) if s is not outer and isinstance(s, (Loop, Pipe)) for k in s.counters}
            assert not inner & {k.name for k in outer.counters}, (tiles, show(prog))


def pipe_work(prog) -> int:
    """Pipe iterations the loop program runs in all (each pipe's, times its loops' trips)."""

    def go(c, trips):
        if isinstance(c, Pipe):
            return trips * c.iterations
        if isinstance(c, Loop):
            return sum(go(s, trips * c.iterations) for s in c.stages)
        return sum(go(s, trips) for s in getattr(c, "children", ()))

    return go(prog.root, 1)


@pytest.mark.parametrize("tiles", [{}, {"n": 4, "o": 4, "i": 2}, {"i": 8}])
def test_a_layer_on_the_layer_before_reads_it_stored_once(tiles):
    # inlining layer 1 into layer 2 would recompute each of its elements for every o of layer 2
    # (D times the work per layer, D^(L-1) for L layers): it is stored on chip once instead
    for layers in (1, 2, 3):
        kernel = mlp(layers)
        x, w = mlp_args(layers)
        got, prog = run_lowered(kernel, (x, w), tiles)
        np.testing.assert_array_equal(got, mlp_numpy(x, w))
        stored = [m for m in prog.mems if m.label == "an intermediate array"]
        assert len(stored) == layers - 1 and all(m.shape == (B, D) for m in stored)
        assert pipe_work(prog) <= layers * (B * D * D + 2 * B * D), (tiles, layers, show(prog))


def test_an_intermediate_read_once_per_element_is_still_fused():
    @hw.kernel
    def twice(x: hw.Array[int32, B, D]) -> hw.Array[int32, B]:
        rows = hw.map(B, lambda n: hw.sum(D, lambda i: x[n, i]))
        return hw.map(B, lambda m: rows[m] * 2)

    prog = lower(twice.program, {}, None)
    assert not [m for m in prog.mems if m.label == "an intermediate array"]


def test_substitution_does_not_capture_a_bound_index():
    # h[n, i] inlined into a body binding its own i: the bound i is renamed, not captured
    i, n = ir.Index("i"), ir.Index("n")
    x = ir.Input("x", hw.int32, (D, D))
    body = ir.Reduce((ir.Dim("i", D),), ir.Read(x, (n, i)), ir.Combiner("add"))
    got = ir.subst_indices(body, {"n": i})
    assert got.dims == (ir.Dim("i.1", D),)
    assert got.body == ir.Read(x, (i, ir.Index("i.1")))
    assert ir.free_indices(got) == {"i"}
    # a bound index shadows the substitution
    assert ir.subst_indices(body, {"i": n}) == body


def test_a_helper_nested_in_itself():
    @hw.kernel
    def nested(x: hw.Array[int32, D]) -> int32:
        def f(k):
            return hw.sum(D, lambda i: x[i] * (f(k - 1) if k else 1) + i)

        return f(2)

    x = np.arange(D, dtype=np.int32) - 3
    want = 1
    for _ in range(3):
        want = sum(int(x[i]) * want + i for i in range(D))
    assert nested(x) == want  # the golden model
    for tiles in ({}, {"i": 2}, {"i": 8}):
        got, _ = run_lowered(nested, (x,), tiles)
        assert got == want, tiles


# ---------------------------------------------------------------- patterns that keep index order

M, N = 8, 6


def order_kernels():
    """(kernel, args) of each pattern whose result depends on the order of its 2-D domain."""

    @hw.kernel
    def positives(x: hw.Array[int32, M, N]):
        return hw.filter((M, N), lambda i, j: x[i, j] > 0)

    @hw.kernel
    def emits(x: hw.Array[int32, M, N]):
        return hw.flatmap(
            (M, N), lambda i, j: (hw.emit(x[i, j], when=x[i, j] > 0), hw.emit(-x[i, j], when=x[i, j] < -3)), max_out=2
        )

    @hw.kernel
    def groups(x: hw.Array[int32, M, N]):
        return hw.groupby_fold((M, N), lambda i, j: (x[i, j] % 5, x[i, j]), max_keys=8)

    @hw.kernel
    def last_positive(x: hw.Array[int32, M, N], z: hw.Array[int32, 2]):
        return hw.multifold((M, N), z, lambda i, j: (j % 2, x[i, j]), op=lambda p, q: hw.where(q > 0, q, p))

    x = np.random.default_rng(0).integers(-5, 6, (M, N)).astype(np.int32)
    z = np.zeros(2, np.int32)
    return [(positives, (x,)), (emits, (x,)), (groups, (x,)), (last_positive, (x, z))]


LEGAL_ORDER_TILES = [{}, {"i": 4, "j": 6}, {"j": 2}, {"i": 8, "j": 6}]


def test_index_order_patterns_keep_their_order():
    for kernel, args in order_kernels():
        want = kernel(*args)
        for tiles in LEGAL_ORDER_TILES:
            got, _ = run_lowered(kernel, args, tiles)
            for g, w in zip(got, want):
                np.testing.assert_array_equal(g, w, err_msg=f"{kernel.name} {tiles}")
        with pytest.raises(hw.ScheduleError):
            lower(kernel.program, {"i": 4, "j": 2})


def test_builtin_multifold_ignores_index_order():
    @hw.kernel
    def sums(x: hw.Array[int32, M, N], z: hw.Array[int32, 2]):
        return hw.multifold((M, N), z, lambda i, j: (j % 2, x[i, j]))

    x = np.arange(M * N, dtype=np.int32).reshape(M, N)
    got, _ = run_lowered(sums, (x, np.zeros(2, np.int32)), {"i": 4, "j": 2})
    np.testing.assert_array_equal(got, [x[:, ::2].sum(), x[:, 1::2].sum()])


def two_sizes_kernel():
    """One helper over two extents (8 and 4): the same lambda's index 'i' twice."""

    @hw.kernel
    def two_sizes(x: hw.Array[int32, 8, 8], y: hw.Array[int32, 8, 4]) -> hw.Array[int32, 8]:
        def norm(a, n):
            return lambda r: hw.sum(n, lambda i: a[r, i] * a[r, i])

        nx, ny = norm(x, 8), norm(y, 4)
        return hw.map(8, lambda r: nx(r) - ny(r))

    rng = np.random.default_rng(1)
    x, y = rng.integers(-9, 9, (8, 8)).astype(np.int32), rng.integers(-9, 9, (8, 4)).astype(np.int32)
    return two_sizes, (x, y), (x * x).sum(1) - (y * y).sum(1)


def test_helper_over_two_extents():
    kernel, args, want = two_sizes_kernel()
    np.testing.assert_array_equal(kernel(*args), want)  # the golden model
    for tiles in ({}, {"i": 2}, {"i": 4, "r": 4}):
        got, _ = run_lowered(kernel, args, tiles)
        np.testing.assert_array_equal(got, want, err_msg=str(tiles))


def test_a_scalar_result_computed_from_a_reduction_in_the_loop_interpreter():
    @hw.kernel(metapipeline=False)  # fuzzer finding F1: the loop IR's interpreter once crashed here
    def twice(x0: hw.Array[hw.int32, 8]) -> hw.int32:
        return hw.sum(8, lambda i: x0[i]) * 2

    x = np.arange(8, dtype=np.int32) * 3 - 5
    got, _ = run_lowered(twice, (x,), {})
    assert got == twice(x) == np.int32(2 * x.sum())


# ---------------------------------------------------------------- multifolds sharing a loop


def test_independent_multifolds_over_one_domain_share_its_loop_and_their_common_reduction():
    app = load_pattern("kmeans")
    k = app.kmeans
    prog = lower(k.program, k.schedule.tile, k.schedule.par)
    folds = [m for m in prog.mems if m.label == "the accumulator of a multifold"]
    assert len(folds) == 2
    writers = [
        c
        for c in walk(prog.root)
        if isinstance(c, Loop)
        and any(isinstance(s, Pipe) and any(w.mem in folds and w.op is not None for w in s.writes) for s in c.stages)
    ]
    assert len(writers) == 1  # one loop over the points folds both
    # the nearest centroid is computed once a point: N * K iterations for its distances (par
    # over the coordinates) and N * K for its argmin, N for each fold (twice that, and more,
    # when each fold computed its own)
    n, kk, d = 1024, 8, 16
    assert pipe_work(prog) <= 2 * n * kk + 2 * n + 3 * kk * d


def test_a_multifold_reading_another_is_not_fused_with_it():
    @hw.kernel(tile={"i": 4, "j": 4})
    def chained(x: hw.Array[int32, 16], idx: hw.Array[int32, 16]):
        first = hw.multifold(16, hw.zeros(4, int32), lambda i: (idx[i] & 3, x[i]))
        return hw.multifold(16, hw.zeros(4, int32), lambda j: (idx[j] & 3, first[1] * x[j]))

    rng = np.random.default_rng(0)
    x, idx = rng.integers(-9, 9, 16).astype(np.int32), rng.integers(0, 9, 16).astype(np.int32)
    got, _ = run_lowered(chained, (x, idx), {"i": 4, "j": 4})
    np.testing.assert_array_equal(got, chained(x, idx))


def test_multifolds_that_read_each_other_are_never_partners():
    @hw.kernel
    def three(x: hw.Array[int32, 16], idx: hw.Array[int32, 16]):
        a = hw.multifold(16, hw.zeros(4, int32), lambda i: (idx[i] & 3, x[i]))
        q = hw.multifold(16, hw.zeros(4, int32), lambda j: (idx[j] & 3, x[j] * 2))
        p = hw.multifold(16, hw.zeros(4, int32), lambda k: (idx[k] & 3, q[0]))  # reads q, whole
        return a, p

    x, idx = np.arange(1, 17, dtype=np.int32), (np.arange(16) * 7 % 5).astype(np.int32)
    got, _ = run_lowered(three, (x, idx), {})
    for g, w in zip(got, three(x, idx)):
        np.testing.assert_array_equal(g, w)


def test_a_partner_whose_slice_is_tiled_gets_its_own_schedule_error():
    @hw.kernel(tile={"d": 4})
    def two(x: hw.Array[int32, 16], y: hw.Array[int32, 16, 8], idx: hw.Array[int32, 16]):
        a = hw.multifold(16, hw.zeros(4, int32), lambda i: (idx[i] & 3, x[i]))
        b = hw.multifold(16, hw.zeros((4, 8), int32), lambda j: (idx[j] & 3, hw.map(8, lambda d: y[j, d])))  # L:slice
        return a, b

    with pytest.raises(hw.ScheduleError, match="index 'd' walks a slice of a multifold's accumulator"):
        lower(two.program, two.schedule.tile, two.schedule.par)


def test_a_multifold_starting_from_another():
    @hw.kernel
    def chained(x: hw.Array[int32, 16], idx: hw.Array[int32, 16]):
        a = hw.multifold(16, hw.zeros(4, int32), lambda i: (idx[i] & 3, x[i]))
        return hw.multifold(16, a, lambda j: (idx[j] & 3, 1))

    x, idx = np.arange(1, 17, dtype=np.int32), (np.arange(16) * 7 % 5).astype(np.int32)
    for tiles in ({}, {"i": 4, "j": 4}):
        got, _ = run_lowered(chained, (x, idx), tiles)
        np.testing.assert_array_equal(got, chained(x, idx))
