"""Mesh hardware in Verilator: a shard_map whose body all-reduces a local array over a ring
(hw.psum / hw.pmax) runs on p PEs, each with its own DRAM model, joined by link hardware.
Results are bit-exact with the golden model and with numpy; cycles are as predicted."""

import numpy as np
import pytest

import hwgen as hw
from hwgen import int16, int32
from hwgen.dram import DramConfig
from hwgen.mesh.hardware import _ring_phases
from hwgen.model import phase_cycles

pytestmark = pytest.mark.rtl

RNG = np.random.default_rng(7)


def wide(n):
    """int32 values spread over the whole range: products and sums wrap around."""
    return RNG.integers(-(2**31), 2**31, size=n, dtype=np.int64).astype(np.int32)


def dot_kernel(p, n, latency, op="psum", topology="ring", out=None):
    mesh = hw.Mesh((p,), ("x",), topology=topology)
    N = n * p

    @hw.kernel(mesh=mesh, link=hw.LinkConfig(latency=latency), tile={"i": 16})
    def prod(a: hw.Array[int32, N], b: hw.Array[int32, N]):
        def body(al, bl):
            return getattr(hw, op)(hw.map(n, lambda i: al[i] * bl[i]), "x")

        return hw.shard_map(body, mesh=mesh, in_specs=(hw.P("x"), hw.P("x")), out_specs=out or hw.P())(a, b)

    return prod


def phase(sim, k=0):
    """The report of the collective's phase k (its first: the only one on a ring)."""
    return sim.design.report["collective"]["phases"][k]


def check(sim, expected):
    np.testing.assert_array_equal(sim.outputs, expected)
    assert sim.predicted_cycles == sim.cycles
    report = sim.design.report
    assert sim.roofline_cycles == max(
        report["link_bound_cycles"], report["compute_bound_cycles"], report["memory_bound_cycles"]
    )


def test_ring2_psum_of_products_wraps_bit_exact_and_cycles_as_predicted():
    p, n = 2, 256
    k = dot_kernel(p, n, latency=1)
    a, b = wide(n * p), wide(n * p)
    with np.errstate(over="ignore"):
        want = (a * b).reshape(p, n).sum(0, dtype=np.int32)
    sim = k.verify(a, b)  # against the golden model
    check(sim, want)  # and numpy
    ring = phase(sim)
    assert (ring["directions"], ring["chunk"], ring["slice"], ring["rounds"]) == (2, 64, 8, 8)
    slow = k.verify(a, b, dram=DramConfig(latency=37))  # same build, another DRAM latency
    check(slow, want)
    assert slow.cycles > sim.cycles
    jittery = k.verify(a, b, dram=DramConfig(jitter=9), seed=3)  # backpressure everywhere
    np.testing.assert_array_equal(jittery.outputs, want)


def test_ring4_int16_psum_of_column_sums_in_slices_out_spec_split():
    p, rows, n = 4, 8, 256
    mesh = hw.Mesh((p,), ("x",), topology="ring")

    @hw.kernel(mesh=mesh, link=hw.LinkConfig(latency=8), tile={"j": 64})
    def colsum(x: hw.Array[int16, p * rows, n]):
        def body(xl):
            return hw.psum(hw.map(n, lambda j: hw.sum(rows, lambda i: xl[i, j])), "x")

        return hw.shard_map(body, mesh=mesh, in_specs=hw.P("x", None), out_specs=hw.P("x"))(x)

    x = RNG.integers(-(2**15), 2**15, size=(p * rows, n)).astype(np.int16)
    total = x.sum(0, dtype=np.int16)  # wraps in int16, as hw.psum does
    sim = colsum.verify(x)
    check(sim, np.tile(total, p))
    ring = phase(sim)
    assert (ring["directions"], ring["chunk"], ring["slice"], ring["rounds"]) == (2, 32, 16, 2)


def test_ring8_torus_pmax_latency_bound():
    p, n = 8, 64
    k = dot_kernel(p, n, latency=8, op="pmax", topology="torus")
    a, b = wide(n * p), wide(n * p)
    with np.errstate(over="ignore"):
        want = (a * b).reshape(p, n).max(0)
    sim = k.verify(a, b)
    check(sim, want)
    ring = phase(sim)
    assert (ring["directions"], ring["slice"]) == (2, 4)  # shorter than a hop: latency bound


def test_pmin_of_the_local_block_itself_one_word_chunks():
    mesh = hw.Mesh((4,), ("r",), topology="ring")

    @hw.kernel(mesh=mesh, link=hw.LinkConfig(latency=1))
    def tiny(x: hw.Array[int32, 16]) -> hw.Array[int32, 4]:
        return hw.shard_map(lambda b: hw.pmin(b, "r"), mesh=mesh, in_specs=hw.P("r"), out_specs=hw.P())(x)

    x = wide(16)
    sim = tiny.verify(x)
    check(sim, x.reshape(4, 4).min(0))
    ring = phase(sim)
    assert (ring["directions"], ring["slice"]) == (1, 1)  # not whole beats: read whole, then the ring


def test_one_way_when_half_chunks_are_not_whole_beats():
    """48 words on 2 PEs over 8-word DRAM beats: both ways would need chunks of 12 words, not
    whole beats, so the ring goes one way round, in chunks of 24."""
    k = dot_kernel(2, 48, latency=2)
    a, b = wide(96), wide(96)
    with np.errstate(over="ignore"):
        want = (a * b).reshape(2, 48).sum(0, dtype=np.int32)
    sim = k.verify(a, b, dram=DramConfig(words_per_cycle=8))
    check(sim, want)
    ring = phase(sim)
    assert (ring["directions"], ring["chunk"]) == (1, 24)


def test_one_way_ring_when_a_dram_beat_is_one_word():
    """Both directions need beats of two words or more for an all-reduce (four for the other
    collectives: the DRAM side feeds two engines at twice their rate); with one word a beat
    the ring runs one way, streaming slice by slice."""
    p, n = 4, 96
    k = dot_kernel(p, n, latency=3, op="pmin")
    a, b = wide(n * p), wide(n * p)
    with np.errstate(over="ignore"):
        want = (a * b).reshape(p, n).min(0)
    sim = k.verify(a, b, dram=DramConfig(words_per_cycle=1))
    check(sim, want)
    ring = phase(sim)
    assert ring["directions"] == 1 and ring["rounds"] > 1
    jittery = k.verify(a, b, dram=DramConfig(words_per_cycle=1, jitter=7), seed=5)
    np.testing.assert_array_equal(jittery.outputs, want)


def test_unsupported_mesh_programs_still_raise_with_the_users_line():
    mesh = hw.Mesh((4,), ("x",), topology="ring")

    @hw.kernel(mesh=mesh)  # L:unsupported
    def k(a: hw.Array[int32, 64]):
        return hw.shard_map(
            lambda b: hw.psum(b, "x") + hw.psum(b.sum(), "x"), mesh=mesh, in_specs=hw.P("x"), out_specs=hw.P("x")
        )(a)

    for method in ("build", "elaborate"):
        with pytest.raises(hw.UnsupportedError) as e:
            getattr(k, method)()
        assert "the operand of psum must be an array, not a scalar" in e.value.message
    with pytest.raises(hw.UnsupportedError):
        k.verify(np.zeros(64, np.int32))
    mesh2 = hw.Mesh((2, 2), ("x", "y"), topology="mesh")

    @hw.kernel(mesh=mesh2, link=hw.LinkConfig(words_per_cycle=4))
    def k2(a: hw.Array[int32, 64]):
        def body(b):
            return hw.psum(b, ("x", "y"))  # L:unsupported2

        return hw.shard_map(body, mesh=mesh2, in_specs=hw.P(("x", "y")), out_specs=hw.P())(a)

    with pytest.raises(hw.UnsupportedError) as e:
        k2.simulate(np.zeros(64, np.int32))  # DRAM beats of 4 words cannot feed links of 4
    assert "links of 4 words a cycle need DRAM beats of at least 8 words" in e.value.message
    assert e.value.file == __file__
    assert open(__file__).read().splitlines()[e.value.line - 1].endswith("# L:unsupported2")


def test_axis_index_is_each_pes_coordinate(tmp_path):
    """hw.axis_index as a value, before and after a collective: a scalar parameter of the PE
    program that the mesh top ties to each PE's coordinate (a mesh without wraparound numbers
    PEs by coordinate, not by ring position)."""
    from hwgen_sim import runner

    mesh = hw.Mesh((2, 4), ("x", "y"), topology="mesh")

    @hw.kernel(mesh=mesh, link=hw.LinkConfig(latency=3))
    def where(a: hw.Array[int32, 128]):
        def body(b):
            me = hw.axis_index(("y", "x"))  # 2 y + x
            s = hw.psum(hw.map(16, lambda i: b[i] * 10 + me), ("x", "y"))
            return hw.map(16, lambda j: s[j] + hw.axis_index("x") * 1000 + hw.axis_index("y"))

        spec = hw.P(("x", "y"))
        return hw.shard_map(body, mesh=mesh, in_specs=spec, out_specs=spec)(a)

    a = wide(128)
    sim = where.verify(a)
    with np.errstate(over="ignore"):
        total = (a * 10).reshape(8, 16).sum(0, dtype=np.int32) + sum(2 * y + x for x in range(2) for y in range(4))
        want = np.concatenate([total + 1000 * x + y for x in range(2) for y in range(4)]).astype(np.int32)
    np.testing.assert_array_equal(sim.outputs, want)
    assert sim.cycles == sim.predicted_cycles
    design = where.build(out_dir=tmp_path)
    assert ".arg_axis_x(32'd1)" in design.verilog and ".arg_axis_y(32'd3)" in design.verilog
    assert "input [31:0] arg_axis" not in design.verilog.split("endmodule")[0]  # no port of the mesh top
    warnings = runner.lint(design.paths["verilog"], design.paths["waivers"])
    assert "%Warning" not in warnings and "%Error" not in warnings, warnings


def test_mesh_verilog_lints_clean_and_every_pe_is_one_module(tmp_path):
    from hwgen_sim import runner

    design = dot_kernel(4, 64, 8).build(out_dir=tmp_path)
    text = design.verilog
    assert text.count("module prod_pe(") == 1 and text.count("  prod_pe pe") == 4
    assert ".pe_x(2'd3)" in text
    assert text.count("  prod_wire wire_") == 8  # a link each way between neighbours
    assert ".x_prev_rx__valid(x_next_tx3_valid_rx)" in text and ".x_next_rx__valid(x_prev_tx1_valid_rx)" in text
    warnings = runner.lint(design.paths["verilog"], design.paths["waivers"])
    assert "%Warning" not in warnings and "%Error" not in warnings, warnings
    for other in (a2a_kernel((4,), "x", 8), dot_kernel(2, 64, 8)):  # copies and permutes; a ring of 2
        design = other.build(out_dir=tmp_path)
        warnings = runner.lint(design.paths["verilog"], design.paths["waivers"])
        assert "%Warning" not in warnings and "%Error" not in warnings, warnings


def test_a_hang_names_the_pes_not_done(monkeypatch):
    """A run that outlives its timeout is a hang, and the error names the PEs not done (here
    the timeout is cut to 60 cycles, while the PEs are still loading; the build is the ring-of-2
    test's)."""
    import hwgen.mesh.simulate as mesh_sim

    monkeypatch.setattr(mesh_sim, "timeout_cycles", lambda predicted, dram: 60)
    k = dot_kernel(2, 256, 1)
    with pytest.raises(hw.SimulationError) as e:
        k.simulate(wide(512), wide(512))
    assert "did not finish within 60 cycles" in e.value.message
    assert "the mesh hangs; PE(s) 0, 1 of 2 not done; PE 0 is stalled in load" in e.value.message


def test_a_dram_that_stops_answering_names_the_stalled_collective_phase(monkeypatch):
    """The DRAM models stop taking reads after 20 requests: the program (8 beats of each of
    two arrays) is done, and the collective's phase waits for its operand."""
    monkeypatch.setenv("HWGEN_DRAM_STALL_AFTER", "20")
    k = dot_kernel(2, 32, 1)
    with pytest.raises(hw.SimulationError) as e:
        k.simulate(wide(64), wide(64))
    assert e.value.message.endswith(
        "the mesh hangs; PE(s) 0, 1 of 2 not done; PE 0 is stalled in coll0, a collective (all-reduce along 'x'); "
        "ring0, a ring all-reduce along 'x' (phase 1 of 1 of coll0)"
    )


def gather_scatter_kernel(kind, p, m, latency, out, tiled=True):
    mesh = hw.Mesh((p,), ("x",), topology="ring")

    @hw.kernel(mesh=mesh, link=hw.LinkConfig(latency=latency))
    def k(a: hw.Array[int32, m * p]):
        def body(b):
            v = hw.map(m, lambda i: b[i] * 3)
            if kind == "psum_scatter":
                return hw.psum_scatter(v, "x", tiled=True)
            return hw.all_gather(v, "x", tiled=tiled)

        return hw.shard_map(body, mesh=mesh, in_specs=hw.P("x"), out_specs=out)(a)

    return k


@pytest.mark.parametrize("p, m, latency", [(4, 64, 8), (2, 64, 2), (8, 256, 3)])
def test_psum_scatter_on_a_ring_each_pe_keeps_its_reduced_block(p, m, latency):
    a = wide(m * p)
    with np.errstate(over="ignore"):
        want = (a * 3).reshape(p, m).sum(0, dtype=np.int32)
    sim = gather_scatter_kernel("psum_scatter", p, m, latency, hw.P("x")).verify(a)
    check(sim, want)  # the blocks, concatenated, are the whole reduced vector
    ring = phase(sim)
    assert ring["kind"] == "reduce_scatter" and ring["directions"] == 2


@pytest.mark.parametrize(
    "p, m, latency, tiled, words", [(8, 64, 8, True, 4), (2, 256, 1, True, 4), (4, 16, 1, False, 2)]
)
def test_all_gather_on_a_ring_tiled_and_stacked(p, m, latency, tiled, words):
    a = wide(m * p)
    with np.errstate(over="ignore"):
        gathered = a * 3
    sim = gather_scatter_kernel("all_gather", p, m, latency, hw.P(), tiled).verify(
        a, dram=DramConfig(words_per_cycle=words)
    )
    check(sim, gathered if tiled else gathered.reshape(p, m))
    assert phase(sim)["directions"] == (2 if words >= 4 else 1)


def test_all_gather_needs_beats_of_two_words():
    k = gather_scatter_kernel("all_gather", 4, 16, 1, hw.P())
    with pytest.raises(hw.UnsupportedError) as e:
        k.elaborate(dram=DramConfig(words_per_cycle=1))
    assert "an all-gather needs beats of at least 2 words" in e.value.message


def torus_kernel(kind, shape, axes, m, latency, out=None, topology="torus"):
    names = ("x", "y")[: len(shape)]
    mesh = hw.Mesh(shape, names, topology=topology)
    P = int(np.prod(shape))
    group = axes[0] if len(axes) == 1 else axes

    @hw.kernel(mesh=mesh, link=hw.LinkConfig(latency=latency))
    def k(a: hw.Array[int32, m * P]):
        def body(b):
            v = hw.map(m, lambda i: b[i] ^ 5)
            if kind == "psum_scatter":
                return hw.psum_scatter(v, group, tiled=True)
            if kind == "all_gather":
                return hw.all_gather(v, group, tiled=True)
            return getattr(hw, kind)(v, group)

        return hw.shard_map(body, mesh=mesh, in_specs=hw.P(names), out_specs=out or hw.P())(a)

    return k


def test_psum_over_both_axes_of_a_2x4_torus_in_three_phases():
    """psum over (x, y) of axes of different sizes: a reduce-scatter along x, an all-reduce
    along y of the half each PE then holds, an all-gather along x; each phase on its own
    axis's links, cycles the sum of the phases'."""
    a = wide(64 * 8)
    with np.errstate(over="ignore"):
        want = (a ^ 5).reshape(8, 64).sum(0, dtype=np.int32)
    sim = torus_kernel("psum", (2, 4), ("x", "y"), 64, 4).verify(a)
    check(sim, want)
    kinds = [(ph["kind"], ph["axis"]) for ph in sim.design.report["collective"]["phases"]]
    assert kinds == [("reduce_scatter", "x"), ("all_reduce", "y"), ("all_gather", "x")]


def test_all_reduce_over_a_2x2_torus_runs_on_its_tours_faster_than_both_orders_at_once():
    """On a square torus the all-reduce over both axes is one phase on the two torus tours
    (tests/test_torus_tours.py): on a 2x2 torus each PE's next and previous PE along an axis
    are one PE, on two links. Fewer cycles than the three phases running both dimension
    orders at once, as predicted; DRAM latency and jitter change the timing, never the result."""
    a = wide(128 * 4)
    want = (a ^ 5).reshape(4, 128).min(0)
    k = torus_kernel("pmin", (2, 2), ("x", "y"), 128, 5)
    sim = k.verify(a, dram=DramConfig(words_per_cycle=8))
    check(sim, want)
    (ph,) = sim.design.report["collective"]["phases"]
    assert ph["tours"] and ph["axes"] == ["x", "y"] and ph["directions"] == 2
    ring = sim.design.plan.rings[0]
    names = ({"a"}, ring.dst, ring.src)
    wide8 = DramConfig(words_per_cycle=8)
    both = _ring_phases("all_reduce", "min", [("x", "y"), ("y", "x")], 128, k.mesh, k.link, ring.dtype, names, wide8)
    assert phase_cycles(ring, wide8) < sum(phase_cycles(r, wide8) for r in both)
    jittery = k.verify(a, dram=DramConfig(words_per_cycle=8, latency=33, jitter=9), seed=4)
    np.testing.assert_array_equal(jittery.outputs, want)
    narrow = k.verify(a)  # beats of 4 words feed an all-reduce's four engines: each tour both ways
    check(narrow, want)
    assert [(ph["tours"], ph["directions"]) for ph in narrow.design.report["collective"]["phases"]] == [(True, 2)]
    jittery = k.verify(a, dram=DramConfig(latency=29, jitter=11), seed=8)  # the load may fall behind
    np.testing.assert_array_equal(jittery.outputs, want)


def test_pmax_along_one_axis_of_a_2x4_torus_rows_are_separate_rings():
    a = wide(32 * 8)
    want = (a ^ 5).reshape(2, 4, 32).max(1).reshape(64)  # each x row's max, rows side by side
    sim = torus_kernel("pmax", (2, 4), ("y",), 32, 3, out=hw.P("x")).verify(a)
    check(sim, want)


def test_scatter_and_gather_over_two_axes_keep_jax_block_order():
    a = wide(64 * 4)
    with np.errstate(over="ignore"):
        total = (a ^ 5).reshape(4, 64).sum(0, dtype=np.int32)
    sim = torus_kernel("psum_scatter", (2, 2), ("x", "y"), 64, 2, out=hw.P(("x", "y"))).verify(a)
    check(sim, total)  # PE (i, j) holds block 2i + j
    b = wide(16 * 8)
    sim = torus_kernel("all_gather", (2, 4), ("x", "y"), 16, 8).verify(b)
    check(sim, b ^ 5)


@pytest.mark.parametrize("axes", [("x", "y"), ("y", "x")])
def test_scatter_and_gather_over_two_axes_run_both_orders_at_once_with_wide_beats(axes):
    """On a 2x2 mesh (no torus tours: its rings run one way), a reduce-scatter or all-gather
    over both axes runs half of every final block in each dimension order at once (its
    operand or result spread: collective.spread_addr): the same blocks where JAX puts them."""
    wide8 = DramConfig(words_per_cycle=8)
    a = wide(128 * 4)
    with np.errstate(over="ignore"):
        total = (a ^ 5).reshape(4, 128).sum(0, dtype=np.int32)
    scatter = torus_kernel("psum_scatter", (2, 2), axes, 128, 3, out=hw.P(axes), topology="mesh")
    sim = scatter.verify(a, dram=wide8)
    check(sim, total)  # PE (x, y) holds block 2x + y, or 2y + x over (y, x)
    orders = [ph.get("axes") for ph in sim.design.report["collective"]["phases"]]
    assert orders == [list(axes), list(axes[::-1])]
    b = wide(32 * 4)
    gather = torus_kernel("all_gather", (2, 2), axes, 32, 3, topology="mesh")
    sim = gather.verify(b, dram=DramConfig(words_per_cycle=8, latency=27, jitter=5), seed=3)
    blocks = (b ^ 5).reshape(2, 2, 32)  # PE (x, y)'s block; gathered in the order of `axes`
    ordered = blocks if axes == ("x", "y") else blocks.transpose(1, 0, 2)
    np.testing.assert_array_equal(sim.outputs, ordered.reshape(-1))
    orders = [ph.get("axes") for ph in sim.design.report["collective"]["phases"]]
    assert orders == [list(axes[::-1]), list(axes)]


@pytest.mark.parametrize(
    "p, m, latency, shift, partial",
    [(4, 64, 8, 1, False), (4, 64, 3, 2, False), (8, 32, 1, 7, True)],
)
def test_ppermute_shifts_the_blocks_round_the_ring(p, m, latency, shift, partial):
    """A shift of k goes the shorter way round (k = 7 of 8: one hop back), half each way when
    k is half the ring; a PE that is no destination gets zeros."""
    mesh = hw.Mesh((p,), ("x",), topology="ring")
    perm = [(i, (i + shift) % p) for i in range(p - 1 if partial else p)]

    @hw.kernel(mesh=mesh, link=hw.LinkConfig(latency=latency))
    def shifted(a: hw.Array[int32, m * p]):
        def body(b):
            return hw.ppermute(hw.map(m, lambda i: b[i] - 7), "x", perm)

        return hw.shard_map(body, mesh=mesh, in_specs=hw.P("x"), out_specs=hw.P("x"))(a)

    a = wide(m * p)
    with np.errstate(over="ignore"):
        blocks = (a - 7).reshape(p, m)
    want = np.zeros_like(blocks)
    for s, d in perm:
        want[d] = blocks[s]
    sim = shifted.verify(a)
    check(sim, want.reshape(-1))
    ring = phase(sim)
    assert ring["kind"] == "permute" and ring["directions"] == (2 if 2 * shift == p else 1)


def test_ppermute_along_one_axis_of_a_torus_and_a_perm_that_is_no_shift():
    mesh = hw.Mesh((2, 4), ("x", "y"), topology="torus")

    def kernel(perm):
        @hw.kernel(mesh=mesh, link=hw.LinkConfig(latency=2))  # L:noshift
        def k(a: hw.Array[int32, 16 * 8]):
            body = lambda b: hw.ppermute(hw.map(16, lambda i: b[i] + 1), "y", perm)  # noqa: E731
            return hw.shard_map(body, mesh=mesh, in_specs=hw.P(("x", "y")), out_specs=hw.P(("x", "y")))(a)

        return k

    a = wide(16 * 8)
    blocks = (a + 1).reshape(2, 4, 16)
    sim = kernel([(j, (j + 1) % 4) for j in range(4)]).verify(a)
    check(sim, np.roll(blocks, 1, axis=1).reshape(-1))
    # swapping neighbours: two shifts (+1 and -1), the second phase leaving the first's blocks be
    sim = kernel([(0, 1), (1, 0), (2, 3), (3, 2)]).verify(a)
    check(sim, blocks[:, [1, 0, 3, 2]].reshape(-1))
    assert [ph["kind"] for ph in sim.design.report["collective"]["phases"]] == ["permute", "permute"]


@pytest.mark.parametrize(
    "perm, latency, dram",
    [
        ([(0, 2), (1, 1), (2, 3), (3, 0)], 8, DramConfig()),  # a fixed point: its block stays (a copy)
        ([(0, 0), (1, 3), (3, 1)], 1, DramConfig(latency=45, words_per_cycle=8)),  # PE 2 gets zeros
        ([(2, 0), (0, 1)], 5, DramConfig(latency=3, words_per_cycle=2)),
        ([(k, k) for k in range(4)], 8, DramConfig()),  # the identity: copies only, no link used
    ],
)
def test_ppermute_any_permutation_as_phases_of_one_shift_each(perm, latency, dram):
    """One phase per distance (destination - source) mod p: a BlockCopy for 0, a ring permute
    for the others; the first phase writes zeros where it delivers nothing, the later ones
    write only where they deliver, so a PE with no source ends with zeros."""
    mesh = hw.Mesh((4,), ("x",), topology="ring")

    @hw.kernel(mesh=mesh, link=hw.LinkConfig(latency=latency))
    def moved(a: hw.Array[int32, 32 * 4]):
        def body(b):
            return hw.ppermute(hw.map(32, lambda i: b[i] ^ 3), "x", perm)

        return hw.shard_map(body, mesh=mesh, in_specs=hw.P("x"), out_specs=hw.P("x"))(a)

    a = wide(32 * 4)
    blocks = (a ^ 3).reshape(4, 32)
    want = np.zeros_like(blocks)
    for s, d in perm:
        want[d] = blocks[s]
    sim = moved.verify(a, dram=dram)
    check(sim, want.reshape(-1))
    shifts = sorted({(d - s) % 4 for s, d in perm})
    kinds = [ph["kind"] for ph in sim.design.report["collective"]["phases"]]
    assert kinds == ["copy" if k == 0 else "permute" for k in shifts]


def a2a_kernel(shape, axis, block, latency=8, tiled=True, topology=None):
    names = ("x", "y")[: len(shape)]
    mesh = hw.Mesh(shape, names, topology=topology or ("ring" if len(shape) == 1 else "torus"))
    p, q = int(np.prod(shape)), int(np.prod([shape[names.index(a)] for a in np.atleast_1d(axis)]))
    spec = hw.P(names if len(names) > 1 else names[0])

    @hw.kernel(mesh=mesh, link=hw.LinkConfig(latency=latency))
    def exchanged(a: hw.Array[int32, block * q * p]):
        def body(b):
            return hw.all_to_all(hw.map(block * q, lambda i: b[i] * 5), axis, 0, 0, tiled=tiled)

        return hw.shard_map(body, mesh=mesh, in_specs=spec, out_specs=spec)(a)

    return exchanged


@pytest.mark.parametrize(
    "shape, axis, block, latency, dram",
    [
        ((4,), "x", 16, 8, DramConfig()),
        ((2,), "x", 8, 1, DramConfig(latency=7, words_per_cycle=8)),
        ((8,), "x", 4, 3, DramConfig(words_per_cycle=2)),
        ((2, 4), "y", 8, 2, DramConfig()),
        ((2, 4), "x", 8, 2, DramConfig(jitter=9)),
    ],
)
def test_all_to_all_on_a_ring_and_along_one_axis_of_a_torus(shape, axis, block, latency, dram):
    """PE x's block j goes to PE j, which keeps it as its block x: its own block by a copy, the
    others by one ring permute per distance (each reading block x + k and writing block x - k)."""
    names = ("x", "y")[: len(shape)]
    k = a2a_kernel(shape, axis, block, latency)
    a = wide(block * shape[names.index(axis)] * int(np.prod(shape)))
    sim = k.verify(a, dram=dram)  # the golden model, which the JAX tests check, bit for bit
    with np.errstate(over="ignore"):
        want = k(a)
    np.testing.assert_array_equal(sim.outputs, want)
    if not dram.jitter:
        check(sim, want)
    q = shape[names.index(axis)]
    kinds = [ph["kind"] for ph in sim.design.report["collective"]["phases"]]
    assert kinds == ["copy"] + ["permute"] * (q - 1)


@pytest.mark.parametrize(
    "shape, axes, topology, dram",
    [
        ((2, 4), ("x", "y"), "torus", DramConfig()),
        ((2, 4), ("y", "x"), "mesh", DramConfig(jitter=7)),
        ((3, 3), ("y", "x"), "mesh", DramConfig()),
    ],
)
def test_all_to_all_over_two_axes(shape, axes, topology, dram):
    """Member j of the group over `axes` (numbered in their order) gets block j of every
    member: the blocks go by displacement, each along x then y through a scratch array, read
    at the destination's block and written at the source's."""
    k = a2a_kernel(shape, axes, 8, latency=3, topology=topology)
    p = int(np.prod(shape))
    a = wide(8 * p * p)
    sim = k.verify(a, dram=dram)
    with np.errstate(over="ignore"):
        grid = (a * 5).reshape(shape + (p, 8))  # (PE coordinates, destination block, words)
    # the group index of PE (x, y) over `axes`, and the PE of group index j
    index = lambda c: c[1] * shape[0] + c[0] if axes == ("y", "x") else c[0] * shape[1] + c[1]  # noqa: E731
    member = {index(c): c for c in np.ndindex(shape)}
    want = np.stack([np.stack([grid[member[s]][index(c)] for s in range(p)]) for c in np.ndindex(shape)])
    np.testing.assert_array_equal(sim.outputs, want.reshape(-1))
    if not dram.jitter:
        check(sim, want.reshape(-1))
    phases = sim.design.report["collective"]["phases"]
    assert phases[0]["kind"] == "copy" and len(phases) > p


def test_all_to_all_by_hand_on_a_ring_of_four():
    a = wide(4 * 4 * 4)
    sim = a2a_kernel((4,), "x", 4).verify(a)
    with np.errstate(over="ignore"):
        local = (a * 5).reshape(4, 4, 4)  # PE, destination block, words
    np.testing.assert_array_equal(sim.outputs.reshape(4, 4, 4), local.transpose(1, 0, 2))
    narrow = "the all_to_all over x moves blocks of 2 words, which must be a multiple of the DRAM beat"
    with pytest.raises(hw.UnsupportedError, match=narrow):
        a2a_kernel((4,), "x", 2).elaborate()


def chain_kernel(body, p=4, n=64, latency=6, out=None, tile=None):
    """A shard_map over a ring of p of two int32 arrays of n words per PE, split along x."""
    mesh = hw.Mesh((p,), ("x",), topology="ring")

    @hw.kernel(mesh=mesh, link=hw.LinkConfig(latency=latency), tile=tile or {"i": 16})
    def k(a: hw.Array[int32, n * p], b: hw.Array[int32, n * p]):
        return hw.shard_map(
            body, mesh=mesh, in_specs=(hw.P("x"), hw.P("x")), out_specs=hw.P("x") if out is None else out
        )(a, b)

    return k


def test_work_after_a_collective_reads_its_result_in_the_same_program():
    """Each PE subtracts its own products from the all-reduced sum of a: the program stores
    a's block, the all-reduce runs, then a second part of the program reads its result."""
    n, p = 64, 4

    def body(al, bl):
        s = hw.psum(hw.map(n, lambda i: al[i]), "x")
        return hw.map(n, lambda j: s[j] - al[j] * bl[j])

    a, b = wide(n * p), wide(n * p)
    with np.errstate(over="ignore"):
        total = a.reshape(p, n).sum(0, dtype=np.int32)
        want = (total[None, :] - a.reshape(p, n) * b.reshape(p, n)).reshape(-1)
    sim = chain_kernel(body, tile={"i": 16, "j": 16}).verify(a, b)
    check(sim, want)
    units = [s["unit"] for s in sim.design.report["controllers"]["stages"]]
    assert 0 < units.index("coll0") < len(units) - 1  # the program's parts before and after it
    assert sim.design.report["collectives"][0]["kind"] == "all_reduce"


def test_collectives_one_after_another_reduce_scatter_then_all_gather_is_an_all_reduce():
    n, p = 64, 4

    def body(al, bl):
        t = hw.psum_scatter(hw.map(n, lambda i: al[i] + bl[i]), "x", tiled=True)
        return hw.all_gather(hw.map(n // p, lambda j: t[j] * 3), "x", tiled=True)

    a, b = wide(n * p), wide(n * p)
    with np.errstate(over="ignore"):
        once = ((a + b).reshape(p, n).sum(0, dtype=np.int32) * 3).astype(np.int32)
    sim = chain_kernel(body, out=hw.P()).verify(a, b)
    check(sim, once)
    kinds = [c["kind"] for c in sim.design.report["collectives"]]
    assert kinds == ["reduce_scatter", "all_gather"] and "collective" not in sim.design.report


def test_a_permuted_block_used_twice_around_an_all_reduce_and_under_dram_jitter():
    """ppermute, then a psum of products with the received block, then the received block
    added: three program parts and two collectives; jitter changes cycles, never results."""
    n, p = 64, 4
    shift = [(j, (j + 1) % p) for j in range(p)]

    def body(al, bl):
        r = hw.ppermute(hw.map(n, lambda i: al[i]), "x", shift)
        s = hw.psum(hw.map(n, lambda j: r[j] * bl[j]), "x")
        return hw.map(n, lambda k: s[k] + r[k])

    a, b = wide(n * p), wide(n * p)
    blocks_a, blocks_b = a.reshape(p, n), b.reshape(p, n)
    received = np.roll(blocks_a, 1, axis=0)  # PE j gets PE j - 1's block
    with np.errstate(over="ignore"):
        total = (received * blocks_b).sum(0, dtype=np.int32)
        want = (total[None, :] + received).astype(np.int32).reshape(-1)
    k = chain_kernel(body, tile={"i": 16, "j": 16, "k": 16})
    check(k.verify(a, b), want)
    jittery = k.verify(a, b, dram=DramConfig(jitter=7), seed=2)
    np.testing.assert_array_equal(jittery.outputs, want)


def test_collectives_of_different_widths_in_one_body_are_refused():
    def body(al, bl):
        s = hw.psum(hw.map(64, lambda i: al[i]), "x")
        return hw.psum(hw.map(64, lambda j: (s[j] + bl[j]).astype(int16)), "x")

    with pytest.raises(hw.UnsupportedError) as e:
        chain_kernel(body).elaborate()
    assert "the collectives of one body must move elements of one width" in e.value.message


def _units(entry) -> set:
    """The controller names in a report entry's subtree."""
    out = {entry["unit"]}
    for c in entry.get("stages", []) + entry.get("parallel", []):
        out |= _units(c)
    return out


def test_a_fold_after_a_collective_stays_after_it():
    """Two multifolds of one shape, one on each side of a psum: the later one reads the
    psum's result, so it may not share the earlier one's loop (which runs before the
    collective)."""
    n, p = 64, 4

    def body(al, bl):
        h = hw.multifold(n, hw.zeros(n, int32), lambda i: (i, al[i]))
        s = hw.psum(h, "x")
        return hw.multifold(n, hw.zeros(n, int32), lambda j: (j, s[j] * 2 + bl[j]))

    a, b = wide(n * p), wide(n * p)
    with np.errstate(over="ignore"):
        total = a.reshape(p, n).sum(0, dtype=np.int32)
        want = (total[None, :] * 2 + b.reshape(p, n)).astype(np.int32).reshape(-1)
    k = chain_kernel(body, tile={"i": 16, "j": 16})
    stages = k.elaborate().report["controllers"]["stages"]
    units = [_units(s) for s in stages]
    at = next(j for j, u in enumerate(units) if "coll0" in u)  # alone, or in a level beside the fold's init
    assert at < len(units) - 2 and "metaloop1" in units[-2]  # the second fold's loop comes after it
    check(k.verify(a, b), want)


@pytest.mark.parametrize("p", [4, 2])
def test_a_load_slower_than_the_ring_delays_it_and_never_hangs(monkeypatch, p):
    """A reduce-scatter fed by DRAM beats only as wide as its engines' rate (a plan hwgen does
    not choose: its load falls behind, so its cycles are not the model's) still finishes
    bit-exact: a round whose last pop comes before the next round's send is done moves its
    counters on all the same (this hung before); on 2 PEs a round is one step."""
    from hwgen.mesh import hardware

    monkeypatch.setattr(hardware, "dram_words", lambda kind, rate: rate)
    a = wide(1024 * p)
    sim = gather_scatter_kernel("psum_scatter", p, 1024, 8, hw.P("x"), True).verify(
        a, dram=DramConfig(words_per_cycle=2)
    )
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(sim.outputs, (a * 3).reshape(p, 1024).sum(0, dtype=np.int32))
    assert phase(sim)["directions"] == 2 and phase(sim)["rounds"] > 1
    assert sim.cycles > sim.predicted_cycles
