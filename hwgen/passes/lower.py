"""Lower: the fused pattern IR and a schedule become the loop IR (loops.py).

For each result, and for each reduction nested in it:
1. strip-mine every index `d` by its tile size T: an outer counter over tiles (`d` or `d.t`)
   and a local counter inside the tile (`d` or `d.l`); `d` becomes `outer * T + local`;
2. a reduction nested in a body becomes its own loop, run as an earlier stage, that folds into
   an accumulator memory indexed by the enclosing local counters it depends on; a reduction
   that depends on no index at all is computed once, before everything that uses it;
3. every array read becomes a read of a tile copy: reads of one array whose subscripts differ
   only in local counters and constants share a tile (the halo of `x[i]`, `x[i + 1]`), loaded
   by a Load stage before the pipe that reads it;
4. the body becomes a Pipe over the local counters writing a result tile, stored by a Store.

Untiled indices have T = 1: the paper's baseline is the same structure with one-element tiles.
Steps 1 and 3 (tiles and lanes) live in tiles.py, step 2 in reductions.py, and group-bys,
filters and flatmaps in collect.py; this file drives them over the program's results.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import replace

from .. import ir
from ..affine import Affine
from ..errors import UnsupportedError
from ..lang.dtypes import int64
from ..lang.program import Program
from ..lang.signature import raw_dtype
from ..loops import Dram, Group, Loop, LoopProgram, Mem, Pipe, ScalarOut, Store, Write
from .collect import Collections
from .fuse import fuse
from .reductions import Reductions
from .tiles import Tiles


def lower(program: Program, tiles: dict, par: dict | None = None) -> LoopProgram:
    """The loop program of `program` with `tiles` (index name -> tile size; default 1) and
    `par` (index name -> lanes of its in-tile counter). Loops come out sequential
    (passes/metapipeline.py decides which overlap)."""
    return _Lowerer(program, tiles, par or {}).run()


class _Lowerer(Tiles, Reductions, Collections):
    """The lowering of one program; tiles, reductions and collections live in their own files."""

    def __init__(self, program: Program, tiles: dict, par: dict):
        self.program = program
        self.tiles = tiles
        self.par = par
        self.extents = program.extents
        self.mems: list[Mem] = []
        self.top: list = []
        self.hoisted: dict = {}
        self.collected: dict = {}  # Collect -> Group, or (values, count) mems of a compaction
        self.local: dict[str, int] = {}  # local (in-tile) counter name -> extent
        self._ids = itertools.count()
        self.inputs = {p.name: Dram(p.name, raw_dtype(p.dtype), p.shape, "in") for p in program.params if p.is_array}

    def run(self) -> LoopProgram:
        drams = list(self.inputs.values())
        scalar_outs = []
        nodes = [fused(r.node) for r in self.program.results]
        for f in nodes:
            _refuse_read_concatenations(f)
        # results between two `then`s (a mesh PE's collectives) or joined arrays (a read
        # concatenation, also a parameter) are one segment: a multifold may share its loop with
        # another of its own segment only (a later one may read what the collective or the
        # joined array's stores write, which does not exist yet)
        segment, segments = 0, []
        for result in self.program.results:
            segments.append(segment)
            segment += bool(result.then) or result.port.name in self.inputs  # or a joined array
        folds = [[n for n in ir.walk(f) if isinstance(n, ir.MultiFold)] if f is not None else [] for f in nodes]
        for k, (result, node) in enumerate(zip(self.program.results, nodes)):
            mine = (n for j, f in enumerate(folds) if segments[j] == segments[k] for n in f)
            self.multifolds = list(dict.fromkeys(mine))
            if node is None:  # a collective of an array the PE's DRAM holds already
                pass
            elif isinstance(node, ir.Concat):  # each part stored in its place
                dram = self.output(result.port.name, node, drams)
                for part, origin in node.placed():
                    self.top.append(self.lower_map(dram, part, origin))
            elif isinstance(node, ir.Roll):
                raise UnsupportedError(
                    "hw.roll is built only as the result of a shard_map body on a mesh: a hw.concatenate "
                    "of equal blocks rolled by whole blocks (see docs/mesh.md); on one PE, concatenate "
                    "the parts in their rolled order instead",
                    node.loc,
                )
            elif isinstance(node, ir.Map):
                dram = self.output(result.port.name, node, drams)
                loop = self.lower_map(dram, node)
                for c in result.then:
                    if c.chunk:
                        loop = _with_stage(loop, c, node, self.tiles)
                self.top.append(loop)
            elif isinstance(node, ir.MultiFold):
                dram = self.output(result.port.name, node, drams)
                acc = self.fold(node)
                self.top.append(Store(acc, dram, tuple(ir.Const(0, int64) for _ in node.shape), node.shape))
            elif isinstance(node, ir.Part):
                dram = self.output(result.port.name, node, drams)
                mem, count = self.collect_part(node)
                limit = ir.MemRead(count, ()) if node.collect.kind == "append" else None
                self.top.append(Store(mem, dram, tuple(ir.Const(0, int64) for _ in node.shape), node.shape, limit))
            else:
                scalar_outs.append(ScalarOut(result.port.name, self.lower_scalar(node)))
            self.top.extend(c for c in result.then if not getattr(c, "chunk", 0))
        root = Loop((), tuple(self.top))
        params = tuple(p for p in self.program.params if not p.is_array)
        groups = tuple(g for g in self.collected.values() if isinstance(g, Group))
        return LoopProgram(self.program.name, params, tuple(drams), tuple(self.mems), tuple(scalar_outs), root, groups)

    def output(self, name: str, node, drams: list) -> Dram:
        """The DRAM array result `name` is stored to: a new one, appended to `drams`, or the
        parameter of that name (a mesh PE's array that later parts read: mesh/hardware.py)."""
        if name in self.inputs:
            return self.inputs[name]
        drams.append(Dram(name, node.dtype, node.shape, "out"))
        return drams[-1]

    def new_mem(self, stem: str, dtype, shape, label: str = "", loc=None) -> Mem:
        mem = Mem(f"{stem}{next(self._ids)}", dtype, tuple(shape), label or stem, loc)
        self.mems.append(mem)
        return mem

    def lower_map(self, dram: Dram, node: ir.Map, at: tuple = ()) -> Loop:
        """The loop computing `node` into `dram`, its element 0 at `at` (default the origin);
        a copy the schedule does not tile gets tiles and lanes of its own (`copy_schedule`)."""
        tiles, par = self.tiles, self.par
        own = copy_schedule(node, tiles)
        self.tiles, self.par = {**tiles, **own[0]}, {**par, **own[1]}
        try:
            return self._lower_map(dram, node, at)
        finally:
            self.tiles, self.par = tiles, par

    def _lower_map(self, dram: Dram, node: ir.Map, at: tuple) -> Loop:
        outer, local, sub = self.split(node.dims)
        stages: list = []
        expr = self.extract(ir.subst_indices(node.body, sub), local, stages)
        expr = self.tile_reads(expr, stages)
        tile_shape = tuple(self.tile(d) for d in node.dims)
        local_idx = self.local_index(node.dims, local)
        squeezed = tuple(i for i in local_idx if isinstance(i, ir.Index))
        if isinstance(expr, ir.MemRead) and (
            (expr.idx == squeezed and expr.mem.shape == tuple(t for t in tile_shape if t > 1))
            or (expr.idx == local_idx and expr.mem.shape == tile_shape)
        ):
            out = expr.mem  # the body is exactly an accumulator: store it directly
        else:
            out = self.new_mem(
                f"{dram.name}_tile", node.dtype, tile_shape, f"the result tile of '{dram.name}'", node.loc
            )
            stages.append(Pipe(tuple(local), (Write(out, local_idx, expr),)))
        origin = []
        for k, d in enumerate(node.dims):
            t = self.tile(d)
            o = next((c for c in outer if c.name in (d.name, f"{d.name}.t")), None)
            shift = at[k] if at else 0
            origin.append(Affine.of({o.name: t} if o else {}, shift).to_expr())
        stages.append(Store(out, dram, tuple(origin), tile_shape))
        return self.loop(outer, stages)

    @staticmethod
    def loop(counters, stages) -> Loop:
        """A (sequential) loop over `counters` running `stages`."""
        return Loop(tuple(counters), tuple(stages))

    def lower_scalar(self, expr: ir.Expr) -> Mem:
        stages: list = []
        expr = self.extract(expr, [], stages)
        expr = self.tile_reads(expr, stages)
        if isinstance(expr, ir.MemRead) and expr.mem.shape == ():
            self.top.extend(stages)
            return expr.mem
        mem = self.new_mem("res", expr.dtype, (), "a scalar result")
        stages.append(Pipe((), (Write(mem, (), expr),)))
        self.top.extend(stages)
        return mem


COPY_TILE = 1024  # elements of a copy's tile, at most
COPY_LANES = 4  # a copy's lanes, at most (the default DRAM beat: DramConfig.words_per_cycle)


def stage_rows(node: ir.Map, tiles: dict) -> int:
    """Rows of dimension 0 that each iteration of `node`'s tile loop stores, when that loop
    has one counter, over dimension 0, and stores whole rows (its other dimensions untiled
    and whole): a collective of the result can then run as a stage of the loop, on the rows
    each iteration stored (loops.Collective `chunk`). Else 0. `node` as lowering sees it
    (fused: `fused`)."""
    own = copy_schedule(node, tiles)[0]
    size = {**tiles, **own}
    names = [ir.schedule_name(d.name) for d in node.dims]
    t = size.get(names[0], 1)
    if t >= node.dims[0].extent or node.dims[0].extent % t:
        return 0
    if any(size.get(n, 1) != d.extent for n, d in zip(names[1:], node.dims[1:])):
        return 0
    return t


def _with_stage(loop: Loop, coll, node: ir.Map, tiles: dict) -> Loop:
    """`loop` (node's tile loop) with collective stage `coll` after its stages, on the words
    each iteration stores (see stage_rows)."""
    rows = stage_rows(node, tiles)
    words = rows * math.prod(node.shape[1:])
    if len(loop.counters) != 1 or words != coll.chunk:
        raise AssertionError(f"a collective stage of {coll.chunk} words on a loop storing {words}")
    (counter,) = loop.counters
    offset = Affine.of({counter.name: words}, 0).to_expr()
    return replace(loop, stages=loop.stages + (replace(coll, offset=offset),))


def copy_schedule(node: ir.Map, tiles: dict) -> tuple:
    """(tiles, lanes) for a map that copies part of an array (its body a read of an input: a
    slice, a block the compiler copies, a part of a concatenation) or fills one with a
    constant (hw.zeros), whose indices the schedule leaves untiled: the last index tiled by
    its largest divisor up to COPY_TILE, the earlier ones by the largest divisors that keep
    the tile within COPY_TILE, the last one on the most lanes up to COPY_LANES (a power of
    two) that divide its tile. Else ({}, {})."""
    copy = isinstance(node.body, ir.Read) and isinstance(node.body.src, ir.Input)
    if not copy and not isinstance(node.body, ir.Const):
        return {}, {}
    names = [ir.schedule_name(d.name) for d in node.dims]
    if not names or any(n in tiles for n in names) or len(set(names)) < len(names):
        return {}, {}
    own, room = {}, COPY_TILE
    for d, name in reversed(list(zip(node.dims, names))):
        t = max(k for k in range(1, min(d.extent, room) + 1) if d.extent % k == 0)
        own[name], room = t, room // t
    last = names[-1]
    lanes = max(k for k in range(1, COPY_LANES + 1) if own[last] % k == 0 and k & (k - 1) == 0)
    return {n: t for n, t in own.items() if t > 1}, ({last: lanes} if lanes > 1 else {})


def fused(node):
    """A result's node fused for lowering: None stays None (nothing to compute); a Concat's
    parts are fused one by one, each a Map (a part that is not one is copied by a Map) or a
    Concat (joined in its place). Kept on the node: a program compiled under many schedules
    (auto.py, dse.py) fuses once."""
    if node is None:
        return None
    found = node.__dict__.get("_fused")
    if found is None:
        found = _fuse_result(node)
        object.__setattr__(node, "_fused", found)
    return found


def _fuse_result(node):
    if isinstance(node, ir.Concat):
        parts = []
        for j, part in enumerate(node.parts):
            if isinstance(part, ir.Roll):
                raise UnsupportedError("a part of hw.concatenate may not be rolled itself", node.loc)
            if isinstance(part, ir.Concat):
                parts.append(fused(part))
                continue
            if not isinstance(part, ir.Map):
                dims = tuple(ir.Dim(f"%cat{j}_{d}", n) for d, n in enumerate(part.shape))
                part = ir.Map(dims, ir.Read(part, tuple(ir.Index(d.name) for d in dims)), loc=node.loc)
            parts.append(ir.unique_binders(fuse(part)))
        return ir.Concat(tuple(parts), node.axis, loc=node.loc)
    return ir.unique_binders(fuse(node))


def _refuse_read_concatenations(node) -> None:
    """A result that reads a hw.concatenate's result (or starts a multifold from one), or a
    hw.roll's, is refused, at the read's line where there is one (a mesh PE stores a joined
    array first, and reads a rolled argument in place: mesh/slices.py)."""
    if node is None:
        return
    rolled = [n for n in ir.walk(node) if isinstance(n, ir.Read) and isinstance(n.src, ir.Roll)]
    if rolled:
        raise UnsupportedError(
            "a rolled argument is read: on one PE read the argument at the rolled index "
            "instead (inside a shard_map body on a mesh, each PE reads its rows of it in place)",
            rolled[0].src.loc or rolled[0].loc,
        )
    used = ir.Concat.used([node])
    if not used:
        return
    reads = [n for n in ir.walk(node) if isinstance(n, ir.Read) and isinstance(n.src, ir.Concat)]
    raise UnsupportedError(
        "the result of hw.concatenate is read here: on one PE it can only be returned; read "
        "its parts instead (inside a shard_map body on a mesh, each PE stores it first)",
        (reads[0].loc if reads else None) or used[0].loc,
    )
