"""Links of more than one word per cycle (hw.LinkConfig(words_per_cycle=w)): each link beat
carries w words, the ring unit's engines pop, combine (a w-lane ALU) and send w words a
cycle, slices are whole beats. Results are bit-exact with the golden model, cycles as
predicted, and the link bound is 1/w of a one-word link's."""

import numpy as np
import pytest

import hwgen as hw
from hwgen import int16, int32
from hwgen.dram import DramConfig

pytestmark = pytest.mark.rtl

RNG = np.random.default_rng(5)


def wide(n, dtype=np.int32):
    info = np.iinfo(dtype)
    return RNG.integers(info.min, info.max + 1, size=n, dtype=np.int64).astype(dtype)


def kernel(kind, shape, m, w, topology="torus", dtype=int32, latency=5):
    names = ("x", "y")[: len(shape)]
    mesh = hw.Mesh(shape, names, topology=topology if len(shape) > 1 else "ring")
    p = int(np.prod(shape))
    over = names if len(names) > 1 else names[0]

    @hw.kernel(mesh=mesh, link=hw.LinkConfig(words_per_cycle=w, latency=latency), tile={"i": 16})
    def k(a: hw.Array[dtype, m * p]):
        def body(b):
            v = hw.map(m, lambda i: b[i] * 5 - 2)
            if kind == "psum_scatter":
                return hw.psum_scatter(v, over, tiled=True)
            if kind == "all_gather":
                return hw.all_gather(v, over, tiled=True)
            if kind == "ppermute":
                return hw.ppermute(v, "x", [(s, (s + 1) % shape[0]) for s in range(shape[0])])
            if kind == "all_to_all":
                return hw.all_to_all(v, "x", 0, 0, tiled=True)
            return getattr(hw, kind)(v, over)

        out = hw.P() if kind in ("psum", "pmax", "pmin", "all_gather") else hw.P(names)
        return hw.shard_map(body, mesh=mesh, in_specs=hw.P(names), out_specs=out)(a)

    return k


def expected(kind, v, shape):
    p = int(np.prod(shape))
    rows = v.reshape(p, -1)
    return {
        "psum": lambda: rows.sum(0, dtype=v.dtype),
        "pmax": lambda: rows.max(0),
        "pmin": lambda: rows.min(0),
        "psum_scatter": lambda: rows.sum(0, dtype=v.dtype),
        "all_gather": lambda: v,
        "ppermute": lambda: np.roll(rows, 1, axis=0).reshape(-1),
        "all_to_all": lambda: rows.reshape(p, p, -1).transpose(1, 0, 2).reshape(-1),
    }[kind]()


@pytest.mark.parametrize(
    "kind, shape, m, w, words, topology",
    [
        ("psum", (4,), 256, 2, 8, "ring"),  # both ways round, two lanes each
        ("pmin", (4,), 256, 4, 16, "ring"),
        ("psum", (2, 2), 128, 2, 16, "torus"),  # one phase on the torus tours, each two ways
        ("psum_scatter", (4,), 128, 2, 8, "ring"),
        ("all_gather", (4,), 64, 2, 8, "ring"),
        ("ppermute", (4,), 128, 2, 8, "ring"),
        ("all_to_all", (4,), 128, 2, 8, "ring"),
        ("pmax", (2, 4), 128, 2, 8, "mesh"),  # one way round each zigzag
    ],
)
def test_wide_links_bit_exact_and_cycles_as_predicted(kind, shape, m, w, words, topology):
    k = kernel(kind, shape, m, w, topology)
    a = wide(m * int(np.prod(shape)))
    sim = k.verify(a, dram=DramConfig(words_per_cycle=words))  # against the golden model
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(sim.outputs, expected(kind, a * 5 - 2, shape))
    assert sim.predicted_cycles == sim.cycles
    report = sim.design.report
    assert report["link"]["words_per_cycle"] == w
    slices = [ph["slice"] for c in report["collectives"] for ph in c["phases"] if "slice" in ph]
    assert slices and all(s % w == 0 for s in slices)  # whole link beats


def test_two_lanes_halve_the_ring_time_and_the_link_bound_and_keep_results_under_jitter():
    a = wide(1024 * 4, np.int16)
    with np.errstate(over="ignore"):
        want = (a * 5 - 2).reshape(4, -1).sum(0, dtype=np.int16)
    runs = {}
    for w in (1, 2):
        sim = kernel("psum", (4,), 1024, w, dtype=int16, latency=8).verify(a, dram=DramConfig(words_per_cycle=8))
        np.testing.assert_array_equal(sim.outputs, want)
        assert sim.predicted_cycles == sim.cycles
        unit = [s["cycles"] for s in sim.design.report["controllers"]["stages"] if "collective" in s]
        runs[w] = (unit[0], sim.design.report["link_bound_cycles"])
    assert runs[1][1] == 2 * runs[2][1] == 768
    assert runs[2][0] < 0.6 * runs[1][0]  # the unit's cycles nearly halve
    jittery = kernel("psum", (4,), 1024, 2, dtype=int16).verify(
        a, dram=DramConfig(words_per_cycle=8, latency=31, jitter=9), seed=6
    )
    np.testing.assert_array_equal(jittery.outputs, want)


def test_dram_beats_too_narrow_for_the_links_are_refused_with_the_users_line():
    mesh = hw.Mesh((4,), ("x",), topology="ring")

    @hw.kernel(mesh=mesh, link=hw.LinkConfig(words_per_cycle=4))
    def k(a: hw.Array[int32, 256]):
        def body(b):
            return hw.all_gather(b, "x", tiled=True)  # L:narrow

        return hw.shard_map(body, mesh=mesh, in_specs=hw.P("x"), out_specs=hw.P())(a)

    with pytest.raises(hw.UnsupportedError) as e:
        k.elaborate(dram=DramConfig(words_per_cycle=4))
    assert "links of 4 words a cycle need DRAM beats of at least 8 words" in e.value.message
    assert open(__file__).read().splitlines()[e.value.line - 1].endswith("# L:narrow")
    k.elaborate(dram=DramConfig(words_per_cycle=8))  # wide enough

    @hw.kernel(mesh=mesh, link=hw.LinkConfig(words_per_cycle=4))
    def r(a: hw.Array[int32, 256]):
        def body(b):
            return hw.psum(b, "x")  # an all-reduce's engines need beats only as wide as their rate

        return hw.shard_map(body, mesh=mesh, in_specs=hw.P("x"), out_specs=hw.P())(a)

    with pytest.raises(hw.UnsupportedError) as e:
        r.elaborate(dram=DramConfig(words_per_cycle=2))
    assert "links of 4 words a cycle need DRAM beats of at least 4 words" in e.value.message
    r.elaborate(dram=DramConfig(words_per_cycle=4))
