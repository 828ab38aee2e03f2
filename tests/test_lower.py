"""The lowering to the loop IR keeps the golden model's answer, for every app and a range of
tile sizes (the loop IR is executed by its own numpy interpreter)."""

import numpy as np
import pytest

from conftest import PATTERNS, load_pattern

from hwgen import ir, loop_interp
from hwgen.loops import Load, Loop, Pipe, Store, walk
from hwgen.passes.lower import lower
from hwgen.lang.signature import check_args, to_user


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
    whole = {d.name: d.extent for r in kernel.program.results for n in ir.walk(r.node)
             if isinstance(n, ir.MultiFold) for d in n.sdims}
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
