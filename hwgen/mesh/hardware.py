"""Hardware for mesh kernels: which shard_map programs build, and their per-PE program.

Supported (everything else raises UnsupportedError with the user's line; docs/mesh.md lists
the forms):

    @hw.kernel(mesh=hw.Mesh(shape, axes, topology=...), link=hw.LinkConfig(latency=L))
    def k(a: hw.Array[int32, ...], ...) -> ...:
        def body(al, ...):
            v = <patterns over the local blocks>        # an array of integers
            s = hw.psum(v, axes)                         # pmax, pmin, psum_scatter, all_gather,
                                                         # ppermute or all_to_all
            return <patterns over the blocks and s>      # or s itself; more collectives may follow
        return hw.shard_map(body, mesh=mesh, in_specs=..., out_specs=...)(a, ...)

Each PE runs the body as an ordinary kernel program over the local blocks, cut at its
collectives: the part before collective k stores its operand to a DRAM array (`partial`);
the collective (a loops.Collective in the program's root sequence) runs as phases
(hw/phases.py), each a RingCollective unit (hw/collective.py) along one axis (or its groups
along one each, or on the torus tours of two), or a BlockCopy
(hw/copy.py) of the block a permutation or all-to-all keeps on the PE, into the kernel's
result array or an array (`collective<k>`) the later parts read (`phase_list`, `_moves`: a
permute's or all-to-all's routes over several axes pass through scratch arrays `route<k>`;
every collective moves blocks along dimension 0, so an array's row-major words as a vector;
ring_plan picks each ring phase's directions and slice by the fastest predicted cycles).
Every PE has the same DRAM layout. On a mesh without wraparound (topology "mesh") each axis'
ring is its zigzag (Mesh.ring_order), one way round, each hop two links long (Mesh.hop_latency):
a permutation's blocks go round it by their distance in ring positions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from .. import ir
from ..errors import HwgenError, UnsupportedError
from ..hw.collective import RingPlan
from ..lang.program import Program, Result
from ..lang.signature import Port
from ..loops import Collective
from ..passes.lower import fused, stage_rows
from ..timing import link_depth
from .checks import shard_maps
from .collectives import axis_param
from .dim0 import along_dim0
from .mesh import LinkConfig, unravel
from .partition import partition
from .slices import rolled_inputs
from .spmd import body_nodes, collectives_in_order

# the body's collective -> (the ring unit's kind, its operation)
OPS = {
    "psum": ("all_reduce", "add"),
    "pmax": ("all_reduce", "max"),
    "pmin": ("all_reduce", "min"),
    "psum_scatter": ("reduce_scatter", "add"),
    "all_gather": ("all_gather", "add"),
    "ppermute": ("permute", "add"),
    "all_to_all": ("all_to_all", "add"),
}
MIN_SLICE = 32  # the receive FIFO holds a slice of at least this many words beyond the latency


@dataclass(frozen=True)
class CollectivePlan:
    """One collective of the body: its `kind` (all_reduce, reduce_scatter, all_gather,
    permute, all_to_all), `axes`, the whole (reduced or gathered) vector's `words`, a
    permute's or all-to-all's (source, destination) block `pairs`, its `phases`
    (collective.RingPlans, copy.CopyPlans: hw/phases.py) and its `loc`; a collective stage
    (`trips` > 1) runs its phases on `words` each of `trips` iterations."""

    kind: str
    axes: tuple
    words: int
    phases: tuple
    pairs: tuple = ()
    loc: object = None
    trips: int = 1  # a collective stage: it runs on `words` each iteration of its operand's loop

    @property
    def op(self) -> str:
        return getattr(self.phases[0], "op", "add")


@dataclass(frozen=True)
class MeshPlan:
    """A supported mesh kernel: the per-PE `program` (its root sequence holds each collective,
    a loops.Collective after the result it reduces or moves is stored), its `collectives`
    (CollectivePlans, in the order they run), the kernel's `mesh`, each parameter's in_spec
    (name -> hw.P), the result's `out_spec`, the DRAM array that holds the kernel's result on
    each PE (`result`), whether the body returns a collective's result directly (`direct`),
    and the program's scalar parameters that hold the PE's coordinates (`coords`: name -> mesh
    axis, for hw.axis_index; the mesh top ties each PE's to its coordinate), the shape
    of the result's block on each PE (`shape`), and the arrays of the program that lie inside
    another at a per-PE place (`aliases`: name -> (the array, its word offset on each PE): the
    parts of a rolled hw.concatenate, and the rows of a rolled argument a PE reads (slices.py);
    the mesh top gives PE k's alias the base of the array plus its offset, and only the array
    has a place of its own in DRAM)."""

    program: Program
    collectives: tuple
    mesh: object
    in_specs: dict
    out_spec: object
    result: str
    direct: bool
    coords: dict
    shape: tuple
    aliases: dict = field(default_factory=dict)  # array -> (the array it lies in, its word offset per PE)
    choice: str = ""  # a global-view program's all-gather feeding a contraction: how it runs, and why
    partitioned: object = None  # a global-view program: the shard_map program it was partitioned into
    compiled: tuple | None = field(default=None, compare=False)  # (passes.Compiled, predicted cycles): "auto"

    @property
    def p(self) -> int:
        return self.mesh.size

    @property
    def rings(self) -> tuple:
        """Every collective's phases, in the order they run (the PE's ring<k> units)."""
        return tuple(ph for c in self.collectives for ph in c.phases)

    @property
    def replicated_axes(self) -> tuple:
        """The axes over which every PE ends with the same result: those of a returned
        all-reduce or all-gather (else none)."""
        if not self.direct:
            return ()
        last = self.collectives[-1]
        return last.axes if last.kind in ("all_reduce", "all_gather") else ()


def plan(kernel, what: str, dram) -> MeshPlan:
    """The kernel's mesh plan for DRAM `dram` (a DramConfig), or UnsupportedError saying why
    its hardware cannot be built. A global-view program is partitioned into a shard_map
    first: with an all-gather feeding a contraction, as collective matmul or not as
    `collective_matmul` says ("auto": whichever the cycle model predicts faster, recorded in
    the plan's `choice`)."""
    if shard_maps(kernel.program):
        return _plan(kernel, kernel.program, what, dram)
    mode = kernel.collective_matmul
    if mode is True:
        ring = partition(kernel, what, windowed=True)
        if ring is None:
            raise UnsupportedError(
                f"cannot {what} kernel '{kernel.name}' with collective_matmul=True: its result is not a "
                f"contraction reading an all-gather of rows over one mesh axis (give collective_matmul='auto')",
                kernel.schedule.loc,
            )
        return replace(_plan(kernel, ring, what, dram), choice="collective matmul (forced)")
    plain = _plan(kernel, partition(kernel, what), what, dram)
    if mode is False:
        return plain
    try:  # "auto": the ring form where it exists and builds, if the model finds it faster
        ring = partition(kernel, what, windowed=True)
        plans = [plain] + ([] if ring is None else [_plan(kernel, ring, what, dram)])
        if len(plans) == 1:
            return plain
        plans = [_predicted(kernel, mp, dram) for mp in plans]
    except HwgenError:
        return plain
    cycles = [mp.compiled[1] for mp in plans]
    pick = int(cycles[1] < cycles[0])
    versus = f"{cycles[pick]} predicted cycles against {cycles[1 - pick]}"
    why = ("collective matmul: " if pick else "all-gather then matmul: ") + versus
    return replace(plans[pick], choice=why)


def _predicted(kernel, mp, dram) -> MeshPlan:
    """Plan `mp` with its program compiled and the cycles the model predicts for it (the link
    bound left out) in `compiled`, which elaborate then reuses."""
    from ..model import predict_mesh
    from ..passes import compile

    compiled = compile(mp.program, kernel.schedule, dram.words_per_cycle, False)
    return replace(mp, compiled=(compiled, predict_mesh(compiled, dram, 0).cycles))


def _plan(kernel, prog, what: str, dram) -> MeshPlan:  # noqa: C901  (one refusal per unsupported form)
    """The mesh plan of `prog` (the kernel's shard_map program, or its partitioned one)."""
    loc = kernel.schedule.loc
    mesh = kernel.mesh

    def refuse(why: str, where=None):
        raise UnsupportedError(
            f"cannot {what} kernel '{kernel.name}' on mesh {mesh.describe()}: {why}. Mesh hardware "
            f"supports one hw.shard_map whose body computes an integer array from its "
            f"blocks with hw.psum / hw.pmax / hw.pmin / hw.psum_scatter / hw.all_gather / hw.ppermute / "
            f"hw.all_to_all of integer arrays along the way (see docs/mesh.md); the golden model "
            f"{kernel.name}(*arrays) works",
            where or loc,
        )

    for a in mesh.axis_names:
        if not a.isidentifier() or not a.isascii():
            refuse(f"the axis name {a!r} must be a plain identifier (it names Verilog ports)")
    link = kernel.link or LinkConfig()
    if len(prog.results) != 1:
        refuse("the kernel must have exactly one result")
    res = prog.results[0]
    node = res.node
    if not isinstance(node, ir.ShardOut) or node.index != 0:
        refuse("the kernel must return the result of a hw.shard_map directly")
    sm = node.shard_map
    if len(sm.body) != 1:
        refuse("the shard_map body must return one array", sm.loc)
    out = sm.body[0]
    if not isinstance(out, ir.ArrayNode) or out.dtype.is_bool:
        refuse("the shard_map body must return an array of integers", sm.loc)
    # the arguments: the kernel's arrays, each passed once, split on dimension 0 or replicated
    params = {pp.name: pp for pp in prog.params}
    if any(not pp.is_array for pp in prog.params):
        refuse("scalar kernel parameters are not built yet")
    if sorted(a.name for a in sm.args if isinstance(a, ir.Input)) != sorted(params) or len(sm.args) != len(params):
        refuse("every kernel argument must be passed to the shard_map once, as it is", sm.loc)
    rename, in_specs, local_params = {}, {}, []
    for a, spec, inp in zip(sm.args, sm.in_specs, sm.params):
        port = params[a.name]
        rename[inp] = ir.Input(a.name, inp.dtype, inp.shape)
        in_specs[a.name] = spec
        local_params.append(Port(a.name, port.dtype, inp.shape))
    local_params.sort(key=lambda q: [pp.name for pp in prog.params].index(q.name))
    taken = set(params) | {res.port.name}
    coords = {}  # hw.axis_index: mesh axis -> the per-PE program's scalar parameter of its coordinate
    for sub in ir.walk(out):
        if isinstance(sub, (ir.ShardMap, ir.ShardOut)):
            refuse("the body may not use another shard_map", sm.loc)
        if isinstance(sub, ir.Param):
            axis = next((a for a in mesh.axis_names if axis_param(a) == sub.name), None)
            if axis is None:
                refuse(f"the body may not use the scalar {sub.name} yet", sm.loc)
            if axis not in coords:
                coords[axis] = _fresh(f"axis_{axis}", taken)
                taken.add(coords[axis])
                local_params.append(Port(coords[axis], sub.dtype, ()))
            rename[sub] = ir.Param(coords[axis], sub.dtype)
        if isinstance(sub, ir.Input) and sub not in rename:
            refuse("the body may read only its local blocks", sm.loc)
        if (isinstance(sub, ir.MultiFold) and sub.checked) or (isinstance(sub, ir.Collect) and sub.kind == "group"):
            refuse(
                "run-time checks (a group-by's max_keys, a multifold subscript from data) are not built on meshes",
                sub.loc,
            )
    aliases = {}  # arrays lying in another at a per-PE place: rolled arguments, a rolled result's parts
    args = {inp: a.name for a, inp in zip(sm.args, sm.params)}
    rolled = rolled_inputs(out, args, mesh, dram.words_per_cycle, refuse)

    def slice_of(roll) -> str:
        """The rows of `roll` a PE reads: an alias in the array rolled (an argument, or a
        collective's result once it has its array); its name."""
        shape, offsets = rolled[roll]
        target = ir.transform(roll.x, lambda x: rename.get(x)).name
        name = _fresh(f"{target}_slice", taken)
        taken.add(name)
        aliases[name] = (target, offsets)
        local_params.append(Port(name, roll.dtype, shape))
        rename[ir.transform(roll, lambda x: rename.get(x))] = ir.Input(name, roll.dtype, shape)
        return name

    for roll in rolled:
        if not isinstance(roll.x, ir.Collective):
            slice_of(roll)
    extents = dict(prog.extents)
    out = along_dim0(out, extents)  # collectives along other dimensions, between local transposes
    colls = collectives_in_order([out])
    joined = list(dict.fromkeys(ir.Concat.used([out])))  # hw.concatenate results the body reads
    plans, results = [], []
    staged = []  # per collective with collective_stages: why it does not run as a stage ("" if it does)

    def local(value, where):
        """`value` over the kernel's arrays and the collectives' results so far, as a per-PE
        program result (a bare array is copied by a Map)."""
        node = ir.transform(value, lambda x: rename.get(x))
        if isinstance(node, ir.Input):
            dims = tuple(ir.Dim(f"%mesh_i{len(results)}" + (f"_{d}" if d else ""), e) for d, e in enumerate(node.shape))
            extents.update((d.name, d.extent) for d in dims)
            node = ir.Map(dims, ir.Read(node, tuple(ir.Index(d.name) for d in dims)), loc=where)
        return node

    for point in body_nodes([out]):  # collectives and read concatenations, each after what it uses
        if point in joined:  # stored where its parts go, in an array the later parts load
            name = _fresh(f"joined{joined.index(point)}", taken)
            taken.add(name)
            results.append(Result(Port(name, point.dtype, point.shape), local(point, point.loc)))
            local_params.append(Port(name, point.dtype, point.shape))
            rename[ir.transform(point, lambda x: rename.get(x))] = ir.Input(name, point.dtype, point.shape)
        if not isinstance(point, ir.Collective):
            continue
        coll, k = point, colls.index(point)
        bare = ir.transform(coll.operand, lambda x: rename.get(x))
        if isinstance(bare, ir.Input):  # an array in the PE's DRAM already: the collective reads it
            partial = bare.name
        else:
            partial = _fresh("partial" if len(colls) == 1 else f"partial{k}", taken)
        dst = res.port.name if coll is out else _fresh(f"collective{k}", taken | {partial})
        taken |= {partial, dst}
        operand = Port(partial, coll.operand.dtype, coll.operand.shape)
        value = None if isinstance(bare, ir.Input) else local(coll.operand, coll.loc)
        cp, chunk = None, 0
        if kernel.collective_stages:
            cp, chunk, why = _stage(coll, value, kernel.schedule.tiles, (mesh, link, dram), (partial, dst, taken))
            staged.append(why)
        if cp is None:
            cp = _collective(coll, mesh, link, dram, (partial, dst, taken), refuse, what, kernel.name)
        plans.append(cp)
        # the collective, as the body's later values see it once rewritten, is its result array
        rename[ir.transform(coll, lambda x: rename.get(x))] = ir.Input(dst, coll.dtype, coll.shape)
        if coll is not out:
            local_params.append(Port(dst, coll.dtype, coll.shape))
        within = tuple(slice_of(roll) for roll in rolled if roll.x == coll)
        results.append(Result(operand, value, then=(Collective(cp.phases, within=within, chunk=chunk),)))
    if staged and all(staged):  # collective_stages=True, and none runs as a stage
        refuse(f"collective_stages=True, but no collective can run as a stage: {staged[0]}", sm.loc)
    if len({c.dtype.bits for c in colls}) > 1:
        refuse("the collectives of one body must move elements of one width (the links carry one)", sm.loc)
    direct = bool(colls) and out is colls[-1]
    if isinstance(out, ir.Roll):  # each part its own array, placed in the result by the PE's shift
        offsets = _rolled_offsets(out, mesh, refuse, sm.loc)
        for j, (part, words) in enumerate(zip(out.x.parts, offsets)):
            name = _fresh(f"{res.port.name}_part{j}", taken)
            taken.add(name)
            aliases[name] = (res.port.name, words)
            results.append(Result(Port(name, out.dtype, part.shape), local(part, sm.loc)))
    elif not direct:  # work after the last collective, into the kernel's result
        results.append(Result(Port(res.port.name, out.dtype, out.shape), local(out, sm.loc)))
    program = Program(prog.name, tuple(local_params), tuple(results), extents, prog.loc)
    coords = {name: axis for axis, name in coords.items()}
    partitioned = None if prog is kernel.program else prog
    return MeshPlan(
        program,
        tuple(plans),
        mesh,
        in_specs,
        sm.out_specs[0],
        res.port.name,
        direct,
        coords,
        out.shape,
        aliases,
        partitioned=partitioned,
    )


def _rolled_offsets(out, mesh, refuse, loc) -> list:
    """Per part of the rolled concatenation `out` (an ir.Roll), the word offset of its place
    in the result on each PE; refused unless the parts are equal blocks along axis 0 and
    every PE's shift is a whole number of blocks."""
    from ..interp import Evaluator, Frame

    cat = out.x
    if not isinstance(cat, ir.Concat) or cat.axis != 0 or len({q.shape for q in cat.parts}) != 1:
        refuse("hw.roll must roll a hw.concatenate of equal blocks along axis 0", out.loc or loc)
    allowed = {axis_param(a) for a in mesh.axis_names}
    for e in ir.walk(out.shift):
        if not isinstance(e, (ir.Const, ir.Param, ir.Binary, ir.Unary, ir.Cast)) or (
            isinstance(e, ir.Param) and e.name not in allowed
        ):
            refuse("the shift of hw.roll must be computed from hw.axis_index and constants", out.loc or loc)
    rows, n = cat.parts[0].shape[0], cat.shape[0]
    row_words = math.prod(cat.shape[1:])
    shifts = []
    for k in range(mesh.size):
        args = {axis_param(a): np.int32(c) for a, c in zip(mesh.axis_names, mesh.coords(k))}
        shifts.append(int(np.ravel(Evaluator(args).expr(out.shift, Frame(params=args)))[0]))
    if any(s % rows for s in shifts):
        refuse(f"hw.roll must shift by whole blocks of {rows} rows on every PE", out.loc or loc)
    return [tuple((at + s) % n * row_words for s in shifts) for at in cat.offsets()]


def _stage(coll, value, tiles: dict, where: tuple, arrays: tuple) -> tuple:
    """(its CollectivePlan, the words of a chunk, "") of body collective `coll` as a stage
    of the tile loop of its operand `value` (a Map, or None for an array in DRAM: passes/
    lower.py stage_rows), each iteration an all-reduce of the rows it stored; or (None, 0,
    why not)."""
    mesh, link, dram = where
    kind = OPS.get(coll.kind, ("",))[0]
    if kind != "all_reduce" or len(coll.axes) != 1:
        over = ", ".join(repr(a) for a in coll.axes)
        return None, 0, f"only an all-reduce over one axis runs as a stage, not hw.{coll.kind} over {over}"
    rows = stage_rows(fused(value), tiles) if isinstance(value, ir.Map) else 0
    if not rows:
        why = (
            f"the operand of hw.{coll.kind} must be computed in tiles of its rows (a tile of dimension 0 "
            f"smaller than it, the other dimensions whole)"
        )
        return None, 0, why
    shape = (rows,) + tuple(coll.shape[1:])
    part = ir.Collective(coll.kind, coll.axes, coll.params, ir.Input("%chunk", coll.dtype, shape), shape, loc=coll.loc)

    def refuse(why, loc):
        raise UnsupportedError(why, loc)

    try:
        cp = _collective(part, mesh, link, dram, arrays, refuse, "stage", "")
    except HwgenError:
        words, p = math.prod(shape), mesh.shape[coll.axes[0]]
        why = (
            f"each iteration of the tile loop computing the operand of hw.{coll.kind} stores {words} "
            f"word{'s' if words != 1 else ''}, which cannot be all-reduced on their own (each of the {p} PEs' "
            f"blocks of them must be whole DRAM beats of {dram.words_per_cycle} words); give dimension 0 a "
            f"larger tile"
        )
        return None, 0, why
    if len(cp.phases) != 1:
        return None, 0, "a collective of several phases does not run as a stage"
    return replace(cp, trips=coll.shape[0] // rows), math.prod(shape), ""


def _collective(coll, mesh, link, dram, arrays: tuple, refuse, what: str, name: str):  # noqa: C901
    """The CollectivePlan of body collective `coll`; `arrays`: the DRAM arrays of its operand
    and its result, and the names taken (its phases' arrays between them are named apart)."""
    src, dst, taken = arrays
    if coll.kind not in OPS:
        refuse(f"hw.{coll.kind} is not built on meshes yet", coll.loc)
    axes = tuple(coll.axes)
    if any(mesh.shape[a] < 2 for a in axes):
        refuse("every axis the collective runs over needs at least 2 PEs", coll.loc)
    v = coll.operand
    if not v.shape:
        refuse(f"the operand of {coll.kind} must be an array, not a scalar", coll.loc)
    kind, op = OPS[coll.kind]
    # every form built moves blocks along dimension 0: of a row-major array, whole runs of words
    # (dim0.py has rewritten the others)
    perm = coll.param("perm") if kind == "permute" else ()
    p = math.prod(mesh.shape[a] for a in axes)  # the group's PEs
    if kind == "all_to_all":
        perm = tuple((s, (s + k) % p) for k in range(p) for s in range(p))
    m = math.prod(v.shape)  # the operand's words
    n = m * (p if kind in ("all_gather", "permute") else 1)  # the whole vector's words
    dtype = v.dtype
    if dtype.is_bool:
        refuse(f"the reduced value must be integers, not {dtype.name}", coll.loc)
    if n % p:
        refuse(f"the ring size {p} must divide the reduced length {n}", coll.loc)
    w = link.words_per_cycle

    def wide(step: str) -> str:  # what links of w words need of a phase of kind `step`
        if w == 1:
            return ""
        beats = dram_words(step, w)
        return f"; links of {w} words a cycle need DRAM beats of at least {beats} words and blocks of whole link beats"

    if kind in ("permute", "all_to_all"):
        # JAX numbers a permutation's group over several axes in the mesh's axis order, an
        # all-to-all's in the order of its axis names
        group = axes if kind == "all_to_all" else tuple(a for a in mesh.axis_names if a in axes)
        rings = _moves(kind, n, group, perm, (mesh, link), dtype, (src, dst, taken), dram)
        if rings is None:
            raise UnsupportedError(
                f"cannot {what} kernel '{name}': the {coll.kind} over {', '.join(axes)} moves blocks of "
                f"{n // p} words, which must be a multiple of the DRAM beat ({dram.words_per_cycle} words){wide(kind)}",
                coll.loc,
            )
        return CollectivePlan(kind, axes, n, tuple(rings), tuple(perm), coll.loc)
    names = (taken, dst, src)
    rings = _ring_phases(kind, op, [axes], m, mesh, link, dtype, names, dram)
    if isinstance(rings, tuple):
        step, a, whole, q = rings
        need = ", and an all-gather needs beats of at least 2 words (its writes need twice the ring's rate)"
        raise UnsupportedError(
            f"cannot {what} kernel '{name}': the {step.replace('_', '-')} along '{a}' of "
            f"{whole} words needs each of its {q} blocks to be a multiple of the DRAM beat "
            f"({dram.words_per_cycle} words){need if step == 'all_gather' else ''}{wide(step)}; make the vector a "
            f"multiple of {q * dram.words_per_cycle} words, or give a DramConfig of narrower beats",
            coll.loc,
        )
    orders_at_once = kind == "all_reduce" or kind in ("reduce_scatter", "all_gather") and len(axes) == 2
    if orders_at_once and len(axes) > 1 and len({mesh.shape[a] for a in axes}) == 1:
        # every dimension order at once, each on its part of the vector: faster when the DRAM
        # beat feeds all the engines (model.phase_cycles decides); a reduce-scatter's operand
        # and an all-gather's result are then spread (collective.spread_addr)
        orders = [axes[g:] + axes[:g] for g in range(len(axes))]
        both = _ring_phases(kind, op, orders, m, mesh, link, dtype, names, dram)
        if isinstance(both, list) and _cycles(both, dram) < _cycles(rings, dram):
            rings = both
    if len(axes) == 2 and mesh.topology == "torus" and len({mesh.shape[a] for a in axes}) == 1:
        # the torus tours: one ring phase through every PE, on all four links at once
        k = mesh.shape[axes[0]]
        tour = ring_plan(
            *(n, k * k, mesh.hop_latency(axes[0], link.latency), kind, op, dtype, src, dst, dram, axes[0]),
            axes=axes,
            lanes=link.words_per_cycle,
            tour=True,
        )
        if tour is not None and _cycles([tour], dram) < _cycles(rings, dram):
            rings = [tour]
    return CollectivePlan(kind, axes, n, tuple(rings), (), coll.loc)


def _ring_phases(kind: str, op: str, orders: list, m: int, mesh, link, dtype, names: tuple, dram):
    """The ring phases (RingPlans) of a collective over the axes of `orders` (one tuple of
    axes per group, all of one size when there are several: each group runs its order's
    phases on its part of the vector, in one unit per phase) of an m-word operand; the
    failing (phase kind, axis, words, PEs) when a phase fits no plan. `names`: the array names
    taken, the collective's result array and its operand's."""
    params, result, partial = names
    steps = [phase_list(kind, axes) for axes in orders]
    rings = []
    for k, (step, a) in enumerate(steps[0]):
        words = rings[-1].dst_words if rings else m  # the phase's operand
        q = mesh.shape[a]
        whole = words * q if step in ("all_gather", "permute") else words
        last = k == len(steps[0]) - 1
        src = rings[-1].dst if rings else partial
        dst = result if last else _fresh(f"phase{k}", set(params) | {result, partial})
        params.add(dst)  # the next collective's phases name theirs apart
        group_axes = tuple(s[k][1] for s in steps) if len(orders) > 1 else ()
        spread = ()
        if group_axes and (kind, k) in (("reduce_scatter", 0), ("all_gather", len(steps[0]) - 1)):
            spread = tuple((q, 1) if a == orders[0][0] else (1, q) for a in group_axes)
            piece = whole // (q * q * len(orders))
            if piece * q * q * len(orders) != whole or piece & (piece - 1) or piece % dram.words_per_cycle:
                return step, a, whole, q
        ring = None
        if whole % (q * len(orders)) == 0:
            latency, order, one_way = mesh.hop_latency(a, link.latency), _order(mesh, a), mesh.one_way(a)
            ring = ring_plan(
                *(whole, q, latency, step, op, dtype, src, dst, dram, a),
                axes=group_axes,
                order=order,
                one_way=one_way,
                lanes=link.words_per_cycle,
            )
            ring = ring and replace(ring, spread=spread)
        if ring is None:
            return step, a, whole, q
        rings.append(ring)
    return rings


def _cycles(rings, dram) -> int:
    from ..model import phase_cycles

    return sum(phase_cycles(r, dram) for r in rings)


def _order(mesh, axis: str) -> tuple:
    """The ring order of `axis` as a plan holds it: () when it is the coordinates' own."""
    order = mesh.ring_order(axis)
    return () if order == tuple(range(len(order))) else order


def _moves(kind: str, n: int, axes: tuple, perm, links: tuple, dtype, arrays: tuple, dram):
    """The phases of a permutation or an all-to-all over `axes` (p PEs in all, numbered
    row-major over them, as JAX numbers them: a permutation's in the mesh's order, an
    all-to-all's in its own),
    blocks of n / p words, on `links` (the mesh, its LinkConfig), from the DRAM array `src`
    to `dst` (`arrays`: src, dst and the names taken).
    Its (source, destination) block pairs `perm` go by their displacement: per axis, the
    distance (destination - source) mod q in ring positions (Mesh.ring_order). All pairs of
    one displacement move together, zero first (a BlockCopy: the block a PE keeps), then each
    other displacement as a ring permute by its distance along each axis it moves on, one
    axis after another in the mesh's order (dimension-ordered routes: a move along an axis
    before the last lands in a scratch array `route<k>` of every PE, which the next axis'
    permute reads). The last phase of each displacement writes only on its destinations
    (`receivers`, a bit per PE of the group): the first displacement's writes zeros on the
    others, the later ones leave them be, so a PE with no source ends with zeros. An
    all-to-all moves block x + d of PE x's operand to block x of PE x + d's result in the
    phases of displacement d (the first reads at src_shift d, the last writes at dst_shift -d,
    per axis over several: _a2a_shifts); a permutation's blocks are the whole operand and
    result. None when a block is not whole DRAM beats or a permute fits no
    ring plan (ring_plan: links of w words need DRAM beats of at least 2 w words)."""
    from dataclasses import replace

    from ..hw.copy import CopyPlan

    mesh, link = links
    src, dst, taken = arrays
    sizes = [mesh.shape[a] for a in axes]
    p = math.prod(sizes)
    block = n // p
    if block % dram.words_per_cycle:
        return None
    position = [{c: r for r, c in enumerate(mesh.ring_order(a))} for a in axes]

    groups: dict = {}
    for s, d in perm:
        cs, cd = unravel(s, sizes), unravel(d, sizes)
        delta = tuple((at[y] - at[x]) % q for at, x, y, q in zip(position, cs, cd, sizes))
        groups.setdefault(delta, []).append((s, d))
    scratch = [_fresh(f"route{k}", set(taken) | {src, dst}) for k in range(2)]
    taken.update(scratch if len(axes) > 1 else ())
    q0 = mesh.shape[axes[0]]
    if not groups:  # no pairs: zeros everywhere
        rx = tuple(zip(axes, sizes))
        return [CopyPlan(block, q0, dtype, src, dst, axes[0], None, None, receivers=0, rx_axes=rx)]
    out = []
    for delta in sorted(groups):
        dests = {d for _, d in groups[delta]}
        receivers = -1 if len(dests) == p else sum(1 << d for d in dests)
        rx_axes = tuple(zip(axes, sizes)) if receivers != -1 else ()
        masks = {"receivers": receivers, "rx_axes": rx_axes, "quiet": bool(out)}
        # routes are dimension-ordered: along the axes in the mesh's order
        steps = sorted(((a, k) for a, k in zip(axes, delta) if k), key=lambda s: mesh.axis_names.index(s[0]))
        shifts = _a2a_shifts(mesh, axes, delta) if kind == "all_to_all" else (None, None)
        if not steps:
            out.append(CopyPlan(block, q0, dtype, src, dst, axes[0], *shifts, order=_order(mesh, axes[0]), **masks))
            continue
        read = src
        for j, (a, k) in enumerate(steps):
            q, last = mesh.shape[a], j == len(steps) - 1
            write = dst if last else scratch[j % 2]
            plan = ring_plan(
                *(block * q, q, mesh.hop_latency(a, link.latency), "permute", "add", dtype, read, write, dram, a),
                perm=((0, k),),
                order=_order(mesh, a),
                one_way=mesh.one_way(a),
                lanes=link.words_per_cycle,
            )
            if plan is None:
                return None
            at = (shifts[0] if j == 0 else None, shifts[1] if last else None)
            out.append(replace(plan, src_shift=at[0], dst_shift=at[1], **(masks if last else {})))
            read = write
    return out


def _a2a_shifts(mesh, axes: tuple, delta: tuple) -> tuple:
    """(src_shift, dst_shift) of an all-to-all's phases for the blocks at displacement `delta`
    (per axis of `axes`, in ring positions): each PE reads the block of its destination, x +
    delta, and its destination writes it as the block of its source, x - delta. Along one axis
    the plain shifts; over several, a term per axis (collective.blocks_of)."""
    if len(axes) == 1:
        return delta[0], -delta[0]
    terms = [(a, mesh.shape[a], k, _order(mesh, a)) for a, k in zip(axes, delta)]
    return tuple(terms), tuple((a, q, -k % q, o) for a, q, k, o in terms)


def phase_list(kind: str, axes: tuple) -> list:
    """The ring phases (kind, axis) of a collective over `axes` (major first): an all-reduce
    over several axes is a reduce-scatter along the first, an all-reduce over the rest and an
    all-gather along the first; a reduce-scatter scatters along each axis in turn, major
    first (PE (i, j) keeps block i * size(j) + j); an all-gather gathers minor first."""
    if kind == "all_reduce":
        if len(axes) == 1:
            return [(kind, axes[0])]
        return [("reduce_scatter", axes[0]), *phase_list(kind, axes[1:]), ("all_gather", axes[0])]
    if kind in ("reduce_scatter", "permute"):
        return [(kind, a) for a in axes]
    return [(kind, a) for a in reversed(axes)]


def ring_fifo(latency: int) -> tuple:
    """(receive FIFO depth D, largest slice) for links of `latency` cycles. A slice S <= D
    cannot deadlock (every PE's step 0 fits in its neighbour's FIFO); S <= D - L - 2 also
    keeps the sender from waiting for credits (the step-0 words wait in the FIFO until the
    receiver starts popping, and credits take L cycles back), so the ring runs at its
    latency-bandwidth timing. D: the smallest power of two >= link_depth(L) and
    >= MIN_SLICE + L + 2."""
    need = max(link_depth(latency), MIN_SLICE + latency + 2)
    depth = 1 << (need - 1).bit_length()
    return depth, depth - latency - 2


def _fresh(name: str, taken: set) -> str:
    k = 0
    out = name
    while out in taken:
        k += 1
        out = f"{name}{k}"
    return out


def ring_plan(
    n: int,
    p: int,
    latency: int,
    kind: str,
    op: str,
    dtype,
    src: str,
    dst: str,
    dram,
    axis: str,
    perm=(),
    axes=(),
    order=(),
    one_way=False,
    lanes=1,
    tour=False,
):
    """The fastest RingPlan (by model.ring_collective_cycles) for a collective `kind` of an
    n-word vector on p PEs (a permute: by the (source, destination) pairs `perm`, one shift;
    `axes`: a unit of a group per axis, each on n / len(axes) words) over links of `lanes`
    words a cycle: one or two directions per group (E engines moving E * lanes words a cycle
    in all need, when that is more than one, DRAM beats of at least twice as many words: the
    DRAM side then moves words at twice the rate the engines use them, so a burst of final
    slices never delays the end; an all-reduce's, as many: DRAM reads and writes move a beat
    a cycle each, and it reads p and writes p slices per engine in a round of 2p - 2 steps of
    a slice each, its load two slices ahead; a permute goes the shorter way round, or both when that is
    half the ring; `one_way`: one way only, on a zigzag ring of `order`; `tour`: the two
    groups of `axes` are the torus tours, p being the torus' PEs), and a slice of whole
    link beats dividing the chunk, at most ring_fifo's largest in beats. None when no plan
    fits the DRAM beat (collective.RingCollective's conditions)."""
    from ..model import RING_HOP, ring_collective_cycles

    depth, most = ring_fifo(latency)
    W = dram.words_per_cycle
    if kind == "permute":
        k = (perm[0][1] - perm[0][0]) % p
        receivers = -1  # everyone (the caller narrows it)
        ways = [(1, k, False), (1, p - k, True)] + ([(2, k, False)] if 2 * k == p else [])
    else:
        receivers, ways = 0, [(1, 0, False), (2, 0, False)]
    if one_way:
        ways = ways[:1]
    best = None
    groups = max(1, len(axes))
    for dirs, hops, reverse in ways:
        engines = dirs * groups
        rate = engines * lanes  # words the engines move a cycle
        if rate > 1 and W < dram_words(kind, rate) or n % (engines * p) or (n // engines) % W:
            continue
        chunk = n // engines // p
        if chunk % W and (engines > 1 or kind != "all_reduce") or kind == "all_gather" and W < 2 * rate:
            continue  # an all-gather's own slices come in bursts: its writes need twice the rate
        hop = latency + RING_HOP
        for s in range(lanes, min(chunk, most * lanes) + 1, lanes):
            if kind == "permute" and hops > 1 and s // lanes < min(hop, chunk // lanes):
                continue  # the model is not exact for a multi-hop permute whose slice is shorter than a hop
            if chunk % s == 0:
                plan = RingPlan(
                    *(n, p, s, depth, latency, op, dtype, src, dst, dirs, kind, axis, hops, reverse, receivers),
                    axes=axes,
                    order=order,
                    lanes=lanes,
                    tour=tour,
                )
                key = (ring_collective_cycles(plan, dram), -dirs, -s)
                if best is None or key < best[0]:
                    best = (key, plan)
    return best and best[1]


def dram_words(kind: str, rate: int) -> int:
    """The DRAM beat (words) a ring unit of collective `kind` whose engines move `rate` words a
    cycle in all needs, for its cycles to be as the model predicts (see ring_plan): twice the
    rate, or the rate for an all-reduce."""
    return rate if kind == "all_reduce" else 2 * rate


@dataclass
class MeshDesign:
    """A built mesh kernel: the per-PE `compiled` program, its `plan` (MeshPlan), the PE
    `component` (hw/top.py Top of one PE with its collectives), the whole `verilog` (mesh
    top, PE, link wire) and the `report`."""

    kernel: object
    dram: object
    compiled: object
    plan: MeshPlan
    component: object
    verilog: str
    report: dict
    paths: dict

    @property
    def name(self) -> str:
        return self.kernel.name

    @property
    def program(self):
        return self.compiled.program


def elaborate(kernel, dram=None, what: str = "build", show_ir=None, target=None) -> MeshDesign:
    """The mesh kernel's hardware (`target` "ecp5": multipliers and block RAMs as the device's
    primitives, for synthesis; see hw/device.py)."""
    import time

    from ..dram import DramConfig
    from ..hw import device
    from ..hw.link import LinkWire
    from ..hw.mesh_top import mesh_top_verilog, pe_ports
    from ..hw.sources import with_sources
    from ..hw.top import Top
    from ..model import mesh_link_bound, mesh_route_bound, predict_mesh
    from ..passes import compile, show_ir_wanted
    from ..verilog import to_verilog
    from . import pipeline_hw

    if pipeline_hw.is_pipeline(kernel):  # stages on PEs of their own (hw.pipeline)
        return pipeline_hw.elaborate(kernel, dram, what, show_ir, target)
    started = time.perf_counter()
    dram = dram or DramConfig()
    mp = plan(kernel, what, dram)
    if mp.compiled and not show_ir_wanted(show_ir):  # compiled already, to choose the plan
        compiled = mp.compiled[0]
    else:
        compiled = compile(mp.program, kernel.schedule, dram.words_per_cycle, show_ir)
    name = kernel.name
    link = kernel.link or LinkConfig()
    bits = mp.rings[0].dtype.bits if mp.rings else 32  # the links' words (none without ring phases)
    ring_phases = [r for r in mp.rings if r.kind != "copy"]
    with device.primitives(target):
        top = Top(compiled, dram)
        pe_v = to_verilog(top, f"{name}_pe")
        # a wire module per hop latency: a link's, and on a mesh's zigzag rings two links'
        hops = {a: mp.mesh.hop_latency(a, link.latency) for a in mp.mesh.axis_names}
        latencies = sorted(set(hops.values())) if ring_phases else []
        modules = {lat: f"{name}_wire" + ("" if lat == link.latency else "2") for lat in latencies}
        lanes = link.words_per_cycle
        wire_v = "\n".join(to_verilog(LinkWire(bits, lanes, lat), mod) for lat, mod in modules.items())
    wires = {a: modules[lat] for a, lat in hops.items() if lat in modules}
    top_v = mesh_top_verilog(name, pe_ports(top), mp.mesh, f"{name}_pe", wires, bits * lanes, mp.coords, mp.aliases)
    link_bound = 0  # the collectives run one after another: the sum of their bounds
    for c in mp.collectives:
        group = math.prod(mp.mesh.shape[a] for a in c.axes)
        hops, wraps = getattr(c.phases[0], "hops", 0), mp.mesh.topology != "mesh"
        if c.kind in ("permute", "all_to_all") and len(c.axes) > 1:
            sizes = tuple(mp.mesh.shape[a] for a in c.axes)
            words = mesh_route_bound(c.pairs, sizes, c.words // group, wraps)
        else:  # at a word a cycle
            words = mesh_link_bound(c.kind, c.words * c.trips, group, len(c.axes), hops, c.pairs, wraps)
        link_bound += -(-words // link.words_per_cycle)
    model = predict_mesh(compiled, dram, link_bound)
    collectives = [
        {
            "kind": c.kind,
            "axes": list(c.axes),
            "op": c.op,
            "phases": [_phase_report(r) for r in c.phases],
            **({"stage_iterations": c.trips} if c.trips > 1 else {}),
        }
        for c in mp.collectives
    ]
    report = {
        "kernel": name,
        "schedule": kernel.schedule.describe(),
        "mesh": {
            "shape": list(mp.mesh.axis_sizes),
            "axes": list(mp.mesh.axis_names),
            "topology": mp.mesh.topology,
            "pes": mp.p,
        },
        "link": {
            "latency": link.latency,
            "words_per_cycle": link.words_per_cycle,
            "fifo_depth": max((r.depth for r in ring_phases), default=0),
        },
        "in_specs": {name: repr(spec) for name, spec in mp.in_specs.items()},
        **({"collective_matmul": mp.choice} if mp.choice else {}),
        "out_spec": repr(mp.out_spec),
        "collectives": collectives,
        **({"collective": collectives[0]} if len(collectives) == 1 else {}),
        "dram": {
            "latency": dram.latency,
            "words_per_cycle": dram.words_per_cycle,
            "word_bits": top.word_bits,
            "addr_bits": dram.addr_bits,
        },
        "predicted_cycles": model.cycles,
        "roofline_cycles": model.roofline,
        "compute_bound_cycles": model.compute_bound,
        "memory_bound_cycles": model.memory_bound,
        "link_bound_cycles": link_bound,
        "lanes": model.lanes,
        "controllers": with_sources(model.tree, compiled.program),
        "build_seconds": round(time.perf_counter() - started, 3),
    }
    verilog = "\n".join((top_v, pe_v, wire_v))
    return MeshDesign(kernel, dram, compiled, mp, top, verilog, report, {})


def _phase_report(r) -> dict:
    if r.kind == "copy":
        return {"unit": "BlockCopy", "kind": "copy", "axis": r.axis, "pes": r.p, "words": r.words}
    return {
        "unit": "RingCollective",
        "kind": r.kind,
        "axis": r.axis,
        **({"axes": list(r.axes)} if r.axes else {}),
        **({"tours": True} if r.tour else {}),
        "pes": r.p,
        "words": r.n,
        "directions": r.dirs,
        "chunk": r.chunk,
        "slice": r.slice,
        "rounds": r.rounds,
    }


def build(kernel, out_dir="rtl_out", dram=None, show_ir=None) -> MeshDesign:
    """Write out_dir/<kernel>/<kernel>.v (mesh top, PE and link wire) and report.json, all at
    once (build.write: a failure leaves nothing behind)."""
    from ..build import write

    return write(kernel, elaborate(kernel, dram, "build", show_ir), out_dir)
