"""Global-view mesh kernels: a program written for whole arrays, placed by shardings and
partitioned into the per-PE program of a hw.shard_map with collectives, as GSPMD does.

    @hw.kernel(mesh=mesh, in_shardings=(hw.P("x", None), hw.P(None, "y")), out_shardings=hw.P("x", "y"))
    def mm(a: hw.Array[int32, M, K], b: hw.Array[int32, K, N]):
        return a @ b

The golden model runs the global program; the hardware runs `partition(kernel)`, whose
result is a ShardOut of a ShardMap that mesh/hardware.py builds like a user's shard_map.

**Shardings.** Every array gets one spec, a tuple of mesh axes per dimension: a kernel
argument its `in_shardings` entry (default replicated), a map the axes of its indices. Maps
are taken producers first, each deciding its own indices (maps may share index names):
each index of a map and of the top-level reductions in its body takes the axes that votes
give it: first the reads, those of larger arrays first and, among reads of equal sizes, the
votes that agree with the result's `out_shardings` first (a read `x[..., n, ...]` whose
subscript d is the index n votes n <- x's axes of dimension d), then the result's
`out_shardings`, then (in a second round) the maps that read this one. An index takes the
first vote whose axes no other index of the map holds and whose group divides its extent.
Only indices used as nothing but the plain subscript of an array dimension of their extent
(once per read) may be split (as a value, in an affine subscript or over part of a dimension
they would need the PE's offset), and a reduction's only if its operation is + max or min
(its collective). An array given to `hw.with_sharding_constraint(x, spec)` takes exactly its
spec's axes, or is refused.

**Partitioning.** Each map becomes a map over its local extents reading local blocks (a
split index renamed `<name>.n<extent>`: the schedule still names it):
- a read whose array is split as the read needs: the local block, nothing moves;
- an array split over axes the read does not split its dimension by: an all-gather along
  that dimension over those axes (tiled) first;
- a kernel argument read more finely split than placed (e.g. replicated, read by a split
  index): placed as the read needs it (the harness writes each PE its block; as GSPMD's
  free local slice) when all its reads agree, else refused;
- a top-level reduction over split indices: the partial reduction over the local extents,
  as a map over the indices of the enclosing map it uses, then psum / pmax / pmin over the
  reduced axes; the map reads its result. A sum whose first such index is voted the same
  axes is computed for every value of that index (whole in its body) and reduce-scattered
  along it instead (`_scatters`: GSPMD's partial result and reduce-scatter).
The result is reduce-scattered (a psum whose dimension 0 `out_shardings` splits over its
axes), moved by an all-to-all (computed split along d over axes A, wanted split along e over
A) or by a permute (one or more dimensions wanted split by other axes into as many blocks),
or gathered where `out_shardings` splits it less than computed (a collective along a
dimension other than 0 is built between local transposes: dim0.py). Anything else (moving an
array between other splits, a split reduction to a single value, multifolds, group-bys,
filters and flatmaps, collectives) raises UnsupportedError with the user's line.

`kernel.show_ir()` (and `--show-ir`) prints the partitioned shard_map; report.json gives the
placements (`in_specs`, `out_spec`) and the collectives.
"""

from __future__ import annotations

import math

from .. import ir
from ..errors import HwgenError, ScheduleError, UnsupportedError
from ..lang.program import Program, Result
from .mesh import P
from .reshard import all_to_all, moved, permute, plain, regrouped, sliced, swapped
from .reshard import size as _size
from .slices import local_slice
from .specs import check_spec
from .windowed import windowed

REDUCTIONS = {"add": "psum", "max": "pmax", "min": "pmin"}


def partition(kernel, what: str, windowed: bool = False) -> Program | None:
    """The per-PE program of global-view mesh kernel `kernel` (see the module doc); with
    `windowed`, its result's all-gather feeding a contraction as collective matmul
    (mesh/windowed.py), or None when it has none."""
    return _Partition(kernel, what, windowed).program


def _entries(spec: P, ndim: int) -> tuple:
    """A spec as a tuple of axes per dimension (() where not split)."""
    return tuple((spec[d] or ()) if d < len(spec) else () for d in range(ndim))


def _spec(axes: tuple) -> P:
    """The hw.P of axes per dimension, without trailing unsplit dimensions."""
    entries = [a or None for a in axes]
    while entries and entries[-1] is None:
        entries.pop()
    return P(*entries)


class _Partition:
    def __init__(self, kernel, what: str, windowed: bool = False):
        self.kernel, self.mesh, self.what, self.windowed = kernel, kernel.mesh, what, windowed
        prog = kernel.program
        self.loc = kernel.schedule.loc
        if len(prog.results) != 1 or not prog.results[0].port.is_array:
            self.refuse("a global-view mesh kernel must return one array")
        self.result = prog.results[0]
        if any(not port.is_array for port in prog.params):
            self.refuse("scalar kernel parameters are not built yet")
        if self.result.port.dtype.is_bool:
            self.refuse("the result must be integers, not bool_ (convert it with .astype)")
        self.inputs = prog.inputs
        self.placed = {}  # kernel argument -> the spec it is placed by (its in_shardings)
        for port, spec in zip(prog.params, kernel.in_shardings):
            self.placed[port.name] = _entries(spec, len(port.shape))
        self.maps = self._maps(self.result.node)
        # hw.with_sharding_constraint: map -> (its axes per dimension, the call's line)
        self.constraints = {}
        for node, spec, loc in prog.constraints:
            axes = _entries(spec, len(node.shape))
            if self.constraints.get(node, (axes,))[0] != axes:
                self.refuse("one array has two different hw.with_sharding_constraint", loc)
            self.constraints[node] = (axes, loc)
        wanted = {}  # map -> [(index name, axes)] from its consumers
        for last in (False, True):  # the second round takes the consumers' votes
            self.specs = dict(self.placed)  # arguments by name, maps by node: axes per dimension
            self.axes = {}  # map -> its indices' names -> their axes (each map its own)
            self.scattered = {}  # reduction -> the index it is reduce-scattered along
            for m in self.maps:
                self._assign(m, wanted.get(m, []))
            if not last:
                wanted = self._consumer_votes()
        self.program = self._rewrite()  # None: no collective matmul where `windowed` asks for one

    def refuse(self, why: str, where=None):
        raise UnsupportedError(
            f"cannot {self.what} kernel '{self.kernel.name}' on mesh {self.mesh.describe()}: {why}. "
            f"A global-view mesh kernel is partitioned from maps and reductions over its arrays "
            f"(see docs/mesh.md); write anything else in hw.shard_map; the golden model "
            f"{self.kernel.name}(*arrays) works",
            where or self.loc,
        )

    # ------------------------------------------------------------ the program's maps

    def _maps(self, root) -> list:
        """The maps the result depends on, producers first."""
        order, seen = [], set()

        def visit(node):
            if node in seen:
                return
            seen.add(node)
            if isinstance(node, ir.Input):
                return
            if not isinstance(node, ir.Map):
                self.refuse(f"{_UNPARTITIONED.get(type(node), 'this array')} is not partitioned yet", _loc(node))
            for r in _reads(node.body):
                visit(r.src)
            order.append(node)

        visit(root)  # (a returned argument is a map copying it: lang/program.py)
        return order

    def _nest(self, m) -> dict:
        """Index name -> extent of the indices map `m` may split: its own and those of the
        top-level reductions by + max min in its body, each only read as the plain
        subscript of an array dimension of its extent (at most once per read): as a value,
        in an affine subscript or over part of a dimension it would need its PE's offset."""
        out = {d.name: d.extent for d in m.dims}
        for r in _reduces(m.body):
            if r.op.expr is None and r.op.op in REDUCTIONS:
                out.update((d.name, d.extent) for d in r.dims)
        plain, uses = {}, {}
        for e in _tree(m.body):
            if isinstance(e, ir.Index):
                uses[e.name] = uses.get(e.name, 0) + 1
            if isinstance(e, ir.Read):
                names = [s.name for s in e.idx if isinstance(s, ir.Index)]
                for s, n in zip(e.idx, e.src.shape):
                    if isinstance(s, ir.Index) and n == out.get(s.name) and names.count(s.name) == 1:
                        plain[s.name] = plain.get(s.name, 0) + 1
        return {n: e for n, e in out.items() if uses.get(n, 0) == plain.get(n, 0)}

    def _assign(self, m, consumers: list) -> None:
        nest = self._nest(m)
        fixed = self.constraints.get(m)  # hw.with_sharding_constraint: only its axes
        votes = []
        if fixed:
            votes = [(d.name, a) for d, a in zip(m.dims, fixed[0]) if a]
        else:
            wanted = []  # the result's out_shardings: index -> axes
            if m is self.result.node and self.kernel.out_shardings is not None:
                out = _entries(self.kernel.out_shardings, len(m.dims))
                wanted = [(d.name, a) for d, a in zip(m.dims, out) if a]
            tiers = {}  # the reads' votes by their array's size
            for r in _reads(m.body):
                spec = self.specs[_key(r.src)]
                mine = [(sub.name, a) for sub, a in zip(r.idx, spec) if a and isinstance(sub, ir.Index)]
                tiers.setdefault(math.prod(r.src.shape), []).extend(mine)
            for size in sorted(tiers, reverse=True):  # larger arrays first; of equal sizes, the
                tier = tiers[size]  # votes that agree with out_shardings first
                votes += [v for v in tier if v in wanted] + [v for v in tier if v not in wanted]
            votes += wanted + consumers
        axes, used = self.axes.setdefault(m, {}), set()
        for name, a in votes:
            if name not in nest or name in axes or used & set(a) or nest[name] % _size(a, self.mesh):
                continue
            axes[name] = a
            used |= set(a)
        self._scatters(m, nest, votes)
        self.specs[m] = tuple(axes.get(d.name, ()) for d in m.dims)
        if fixed and self.specs[m] != fixed[0]:
            self.refuse(
                f"hw.with_sharding_constraint asks for {_show(fixed[0])}, but the array can only be "
                f"computed as {_show(self.specs[m])} (an index used other than as a plain subscript, "
                f"or a reduction by another operation, cannot be split)",
                fixed[1],
            )

    def _scatters(self, m, nest: dict, votes: list) -> None:
        """GSPMD's partial result then reduce-scatter: a top-level reduction of `m` split over
        axes A whose first index f (of m's, that it uses) is whole and voted A: f takes A too,
        and the reduction is computed for every f, then reduce-scattered along it (no other
        reduction of m holds A's axes: a map's indices never share axes)."""
        axes = self.axes[m]
        for r in _reduces(m.body):
            held = {a for d in r.dims for a in axes.get(d.name, ())}
            free = [d for d in m.dims if d.name in ir.free_indices(r)]
            if r.op.op != "add" or not held or not free or free[0].name in axes or free[0].name not in nest:
                continue
            f = free[0]
            for name, a in votes:
                if name == f.name and set(a) == held and f.extent % _size(a, self.mesh) == 0:
                    axes[f.name] = a
                    self.scattered[r] = f.name
                    break

    def _consumer_votes(self) -> dict:
        """Map -> (its index, axes) for every dimension a consumer reads it split by."""
        out = {}
        for m in self.maps:
            for r, whole in self._reads_in(m):
                if isinstance(r.src, ir.Map):
                    for d, sub in zip(r.src.dims, r.idx):
                        a = self._axes(m, sub, whole)
                        if a:
                            out.setdefault(r.src, []).append((d.name, a))
        return out

    def _axes(self, m, sub, whole=()) -> tuple:
        """The axes the subscript `sub` of a read in map `m` splits its dimension by (none for
        the indices in `whole`: a scattered reduction's own, computed for every value)."""
        if not isinstance(sub, ir.Index) or sub.name in whole:
            return ()
        return self.axes.get(m, {}).get(sub.name, ())

    def _reads_in(self, m):
        """(read, the indices whole there) of every read in map `m`'s body: a scattered
        reduction's index is whole in its body."""
        inside = {}
        for r in _reduces(m.body):
            if r in self.scattered:
                inside.update((id(q), (self.scattered[r],)) for q in _reads(r.body))
        for q in _reads(m.body):
            yield q, inside.get(id(q), ())

    # ------------------------------------------------------------ the per-PE program

    def _needs(self, r, m, whole=()) -> tuple:
        """The spec read `r` of map `m` needs of its array: per dimension its index's axes."""
        return tuple(self._axes(m, s, whole) for s in r.idx)

    def _place(self) -> None:
        """A kernel argument read more finely split than placed is placed as read."""
        shapes = {p.name: p.shape for p in self.kernel.program.params}
        for name in self.inputs:
            needs = {
                self._needs(r, m, whole) for m in self.maps for r, whole in self._reads_in(m) if _key(r.src) == name
            }
            placed = self.placed[name]
            finer = {n for n in needs if any(a and not p for a, p in zip(n, placed))}
            if len(finer) > 1 or (finer and len(needs) > 1):
                if all(sliced(placed, n) for n in finer):
                    continue  # placed as given; the finer reads take the PE's rows in place (_operand)
                ways = " and ".join(sorted(_show(n) for n in needs))
                self.refuse(
                    f"the argument '{name}' is read as {ways}; placing it needs one way (give it in_shardings "
                    f"that split it as all its reads do)"
                )
            if finer:
                (n,) = finer
                if moved(placed, n, shapes[name], self.mesh):
                    continue  # placed as given; its reads move it (an all-to-all: _operand)
                if any(p and p != a for a, p in zip(n, placed)):
                    self.refuse(
                        f"the argument '{name}' is placed {_show(placed)} but read as {_show(n)}; give it "
                        f"in_shardings {_show(n)}"
                    )
                self.placed[name] = n

    def _rewrite(self) -> Program:
        self._place()
        self.local = {}
        mesh = self.mesh
        args, params = [], []
        for k, port in enumerate(self.kernel.program.params):
            spec = self.placed[port.name]
            local = ir.Input(f"%shard0.{k}", self.inputs[port.name].dtype, _local(port.shape, spec, mesh))
            args.append(self.inputs[port.name])
            params.append(local)
            self.local[port.name] = (local, spec)
        for m in self.maps:
            self.local[m] = (self._map(m), self.specs[m])
        node, spec = self.local[self.result.node]
        out = spec
        if self.kernel.out_shardings is not None:
            out = _entries(self.kernel.out_shardings, len(spec))
            node, spec = self._scatter(node, spec, out)
            node, spec = self._move(node, spec, out)
            if swapped(spec, out, self.mesh):
                node, spec = permute(node, spec, out, self.mesh, self.result.node.loc)
            if any(a and a != s for a, s in zip(out, spec)):
                self.refuse(
                    f"the result is computed as {_show(spec)}, which out_shardings {_show(out)} would "
                    f"slice (not built yet: give out_shardings hw.{_spec(spec)!r}, as computed)",
                    self.result.node.loc,
                )
            node = self._gather(node, spec, out, self.result.node.loc, "the result")
        if self.windowed:
            node = windowed(node, mesh)
            if node is None:
                return None
        sm = ir.ShardMap(
            mesh,
            tuple(_spec(self.placed[p.name]) for p in self.kernel.program.params),
            (_spec(out),),
            tuple(args),
            tuple(params),
            (node,),
            loc=self.loc,
        )
        for p in self.kernel.program.params:  # a placement must be a valid spec
            try:
                check_spec(_spec(self.placed[p.name]), p.shape, mesh, f"the placement of '{p.name}'")
            except HwgenError as e:
                self.refuse(e.message)
        port = self.result.port
        res = Result(port, ir.ShardOut(sm, 0, node.dtype, port.shape))
        prog = self.kernel.program
        # every index of the per-PE program over its extent there (the global one elsewhere)
        local = {d.name: d.extent for d in ir.walk(node) if isinstance(d, ir.Dim)}
        extents = {**{n: e for n, e in prog.extents.items() if n not in local}, **local}
        try:  # the schedule names the same indices, over their extents on each PE now
            self.kernel.schedule.check(extents, self.kernel.name)
        except ScheduleError as e:
            raise ScheduleError(f"{e.message} on each PE (the partitioned program splits it)", e.loc) from None
        return Program(prog.name, prog.params, (res,), extents, prog.loc)

    def _dims(self, m, dims: tuple, ren: dict) -> tuple:
        """Map `m`'s `dims` (its own or a reduction's) over their extents on each PE; a split
        one renamed `<name>.n<extent>` (so maps sharing a name may split it differently; the
        schedule still names it) in `ren`."""
        out = []
        for d in dims:
            axes = self.axes.get(m, {}).get(d.name, ())
            n = d.extent // _size(axes, self.mesh)
            name = f"{d.name}.n{n}" if axes else d.name
            ren[d.name] = name
            out.append(ir.Dim(name, n))
        return tuple(out)

    def _map(self, m):
        ren = {}
        dims = self._dims(m, m.dims, ren)
        r = m.body
        if isinstance(r, ir.Reduce) and self._split(m, r) and self.scattered.get(r, m.dims[0].name) == m.dims[0].name:
            return self._reduction(m, r, list(zip(m.dims, dims)), ren)  # the map is the reduction: its collective
        return ir.Map(dims, self._expr(m.body, m, ren, dims), loc=m.loc)

    def _split(self, m, r) -> tuple:
        """The axes reduction `r` of map `m` splits its indices over, in the mesh's order."""
        held = {a for d in r.dims for a in self.axes.get(m, {}).get(d.name, ())}
        return tuple(a for a in self.mesh.axis_names if a in held)

    def _reduction(self, m, r, pairs: list, ren: dict):
        """Reduction `r` of map `m` over split indices: its partial over the local extents, a
        map over the (global, local) dims `pairs` of m (a scattered reduction's index over all
        its values), then its collective: psum / pmax / pmin, or a reduce-scatter."""
        if not pairs:
            self.refuse("a reduction over split indices to a single value is not built yet", r.loc or m.loc)
        ren, f = dict(ren), self.scattered.get(r)
        dims = []
        for d, local in pairs:
            if d.name == f:  # computed for every value of the index, then scattered along it
                local = ir.Dim(d.name, d.extent)
                ren[d.name] = d.name
            dims.append(local)
        rdims = self._dims(m, r.dims, ren)
        body = self._expr(r.body, m, ren, None, (f,) if f else ())
        partial = ir.Map(tuple(dims), ir.Reduce(rdims, body, r.op, loc=r.loc), loc=m.loc)
        loc = r.loc or m.loc
        if f:
            a = self.axes[m][f]
            shape = (partial.shape[0] // _size(a, self.mesh),) + partial.shape[1:]
            return ir.Collective("psum_scatter", a, (("dim", 0), ("tiled", True)), partial, shape, loc=loc)
        return ir.Collective(REDUCTIONS[r.op.op], self._split(m, r), (), partial, partial.shape, loc=loc)

    def _expr(self, e, m, ren: dict, dims, whole=()):
        """Expression `e` of map `m`'s body over the local blocks, its indices renamed by
        `ren`; `dims`: m's local dims when `e` is at the top of the body (outside any
        reduction), else None; `whole`: indices over all their values here."""
        if isinstance(e, ir.Index):
            return ir.Index(ren.get(e.name, e.name), e.dtype)
        if isinstance(e, ir.Read):
            idx = tuple(self._expr(i, m, ren, None, whole) for i in e.idx)
            return ir.Read(self._operand(e, m, whole), idx, loc=e.loc, text=e.text)
        if isinstance(e, ir.Reduce):
            if dims is not None and self._split(m, e):
                used = ir.free_indices(e)
                pairs = [(d, ld) for d, ld in zip(m.dims, dims) if d.name in used]
                coll = self._reduction(m, e, pairs, ren)
                return ir.Read(coll, tuple(ir.Index(ld.name) for _, ld in pairs))
            inner = dict(ren)
            rdims = self._dims(m, e.dims, inner)
            return ir.Reduce(rdims, self._expr(e.body, m, inner, None, whole), e.op, loc=e.loc)
        if isinstance(e, (ir.MemRead, ir.Count)):
            self.refuse("a count of a group-by, filter or flatmap is not partitioned yet", m.loc)
        return ir.rebuild(e, lambda c: self._expr(c, m, ren, dims, whole) if isinstance(c, ir.Expr) else c)

    def _operand(self, r, m, whole=()):
        """The local array read `r` of map `m` reads: its array's block, gathered where the
        read splits a dimension less than the array is."""
        node, spec = self.local[_key(r.src)]
        needs = self._needs(r, m, whole)
        what = f"the argument '{r.src.name}'" if isinstance(r.src, ir.Input) else "an intermediate array"
        if plain(spec, self.mesh) == plain(needs, self.mesh):  # the same blocks
            spec = needs
        if moved(spec, needs, node.shape, self.mesh):
            node, spec = all_to_all(node, spec, needs, self.mesh, r.loc or m.loc)
        if isinstance(node, ir.Input) and sliced(spec, needs):  # GSPMD's free local slice
            node, spec = local_slice(node, needs[0], self.mesh), (needs[0],) + spec[1:]
        if swapped(spec, needs, self.mesh):
            node, spec = permute(node, spec, needs, self.mesh, r.loc or m.loc)
        if regrouped(spec, needs, self.mesh):
            a, b = spec[0], needs[0]
            if isinstance(node, ir.Input) and b[: len(a)] == a:  # each PE's rows lie in its own block
                node = local_slice(node, b[len(a) :], self.mesh)
            else:  # gathered whole along dimension 0, then sliced
                node = local_slice(self._gather(node, spec, ((),) + spec[1:], r.loc or m.loc, what), b, self.mesh)
            spec = (b,) + spec[1:]
        if any(a and a != s for a, s in zip(needs, spec)):
            self.refuse(
                f"{what} is split as {_show(spec)} but read as {_show(needs)}; moving blocks between "
                f"these splits is not built yet (an all-to-all moves the split of one dimension to "
                f"another that is not split; a permute, to as many blocks over other axes; a gather, "
                f"where the read splits less; a gather and a slice, rows into another number of blocks)",
                r.loc or m.loc,
            )
        return self._gather(node, spec, needs, r.loc or m.loc, what)

    def _scatter(self, node, spec: tuple, out: tuple) -> tuple:
        """The result (node, spec) as a reduce-scatter when it is an all-reduce over the axes
        that `out` splits its unsplit dimension 0 by (GSPMD's partial result then
        reduce-scatter); else as it is."""
        if isinstance(node, ir.Collective) and node.kind == "psum" and not spec[0] and out[0]:
            if set(out[0]) == set(node.axes) and node.shape[0] % _size(out[0], self.mesh) == 0:
                shape = (node.shape[0] // _size(out[0], self.mesh),) + node.shape[1:]
                params = (("dim", 0), ("tiled", True))
                node = ir.Collective("psum_scatter", out[0], params, node.operand, shape, loc=node.loc)
                return node, (out[0],) + spec[1:]
        return node, spec

    def _move(self, node, spec: tuple, out: tuple) -> tuple:
        """The result (node, spec) moved by an all-to-all when `out` splits another dimension
        by the axes it is split by along one; else as it is."""
        if moved(spec, out, node.shape, self.mesh):
            return all_to_all(node, spec, out, self.mesh, self.result.node.loc)
        return node, spec

    def _gather(self, node, spec: tuple, needs: tuple, loc, what: str):
        """`node` (split by `spec`) all-gathered along every dimension `needs` splits less
        (along a dimension other than 0, built between local transposes: dim0.py)."""
        for d, (s, n) in enumerate(zip(spec, needs)):
            if s and s != n:
                shape = list(node.shape)
                shape[d] *= _size(s, self.mesh)
                params = (("axis", d), ("tiled", True))
                node = ir.Collective("all_gather", s, params, node, tuple(shape), loc=loc)
        return node


# the other array nodes a program for whole arrays may hold (no shard_map: mesh/checks.py)
_UNPARTITIONED = {ir.MultiFold: "hw.multifold", ir.Part: "hw.groupby_fold, hw.filter or hw.flatmap"}


def _loc(node):
    """The user's line of an array node (a Part's is its Collect's)."""
    return getattr(node, "loc", None) or getattr(getattr(node, "collect", None), "loc", None)


def _show(spec: tuple) -> str:
    """A split as the user writes it: hw.P(...), or replicated."""
    return f"hw.{_spec(spec)!r}" if any(spec) else "replicated"


def _key(node):
    """Arrays are keyed by node, kernel arguments by name (their Input nodes are not unique)."""
    return node.name if isinstance(node, ir.Input) else node


def _local(shape: tuple, spec: tuple, mesh) -> tuple:
    return tuple(n // _size(a, mesh) for n, a in zip(shape, spec)) if spec else tuple(shape)


def _reads(e):
    """The Reads in expression `e` (not inside the arrays they read)."""
    if isinstance(e, ir.Read):
        yield e
        for i in e.idx:
            yield from _reads(i)
        return
    for c in ir.children(e):
        if isinstance(c, ir.Expr):
            yield from _reads(c)


def _reduces(e):
    """The top-level reductions in expression `e`."""
    if isinstance(e, ir.Reduce):
        yield e
        return
    if isinstance(e, ir.Read):
        return
    for c in ir.children(e):
        if isinstance(c, ir.Expr):
            yield from _reduces(c)


def _tree(e):
    """Every expression node of `e`, as often as it occurs (not inside the arrays it reads)."""
    yield e
    for c in ir.children(e):
        if isinstance(c, ir.Expr):
            yield from _tree(c)
