"""Spread arrays (hw/collective.py `spread_addr`): a reduce-scatter or all-gather over both
axes of a square torus, run in both dimension orders at once, reads its operand (or writes its
result) with each group's chunks made of pieces of the final blocks. The map covers the array
once, and each PE's final block is made of one piece of each group."""

from dataclasses import replace

import pytest

import hwgen as hw
from hwgen.dram import DramConfig
from hwgen.hw.collective import RingCollective, spread_addr, spread_piece
from hwgen.lang.dtypes import int32
from hwgen.mesh.hardware import _ring_phases


def _phases(kind, p, n, words=8):
    mesh = hw.Mesh((p, p), ("x", "y"))
    names = (set(), "out", "partial")
    return _ring_phases(
        kind, "add", [("x", "y"), ("y", "x")], n, mesh, hw.LinkConfig(), int32, names, DramConfig(words)
    )


def test_a_spread_array_is_covered_once_and_final_blocks_are_whole_pieces():
    for p in (2, 4):
        n = 64 * p * p
        rings = _phases("reduce_scatter", p, n)
        first = rings[0]
        assert first.spread == ((p, 1), (1, p)) and all(not r.spread for r in rings[1:])
        span = first.n // first.groups  # a group's words: p chunks of p pieces
        chunk = span // p
        addrs = [spread_addr(first, g, c, o) for g in range(2) for c in range(p) for o in range(chunk)]
        assert sorted(addrs) == list(range(first.n))
        P, F = spread_piece(first), first.n // (p * p)
        # group 0's chunk a holds the pieces of blocks a * p + t; group 1's chunk b those of t * p + b
        for a in range(p):
            for t in range(p):
                assert spread_addr(first, 0, a, t * P) == (a * p + t) * F
                assert spread_addr(first, 1, a, t * P) == (t * p + a) * F + P


def test_an_all_gather_spreads_its_last_phase_and_odd_pieces_fall_back():
    rings = _phases("all_gather", 4, 32 * 16)  # 32 words per PE: pieces of 16
    assert [r.spread for r in rings] == [(), ((4, 1), (1, 4))]
    assert rings[-1].axes == ("x", "y")
    fallback = _phases("reduce_scatter", 4, 16 * 3 * 16)  # pieces of 24 words: not a power of two
    assert isinstance(fallback, tuple)


def test_a_unit_refuses_a_spread_it_cannot_address():
    first = _phases("reduce_scatter", 4, 64 * 16)[0]
    RingCollective(first, 8, 8 * 32, 20)  # the planner's own plan builds
    for bad in (replace(first, spread=((4, 1),)), replace(first, kind="all_reduce")):
        with pytest.raises(ValueError, match="spread array"):
            RingCollective(bad, 8, 8 * 32, 20)
