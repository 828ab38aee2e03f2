"""The golden model of a shard_map: every PE's program evaluated with numpy.

`run_shard_map(node, ev)` splits the global arguments into one block per PE (by `in_specs`),
gives each PE its own interp.Evaluator (its blocks, its coordinates as the Params
'%axis.<name>', the kernel's arguments, and the global arrays computed so far, including the
results of any other shard_map the body reads, computed globally first), and evaluates the
body's collectives in dependency order: a collective's operand is evaluated on every PE, the
collective is computed across PEs with numpy (collective()), and each PE's result is stored in
that PE's evaluator, so what follows reads it like any array. The body's results are then joined
by `out_specs`; a mesh axis a spec leaves out takes the value of the PE with index 0 on that
axis.

`collective(node, values, mesh)` works on `values`, one array per PE in PE-id order: it stacks
them into (mesh axes..., local dims...), regroups them as (other PEs, group members, local
dims...) with the group's axes in the collective's order (major first), computes, and undoes
the regrouping.
"""

from __future__ import annotations

import math

import numpy as np

from .. import interp, ir
from .collectives import axis_param
from .mesh import Mesh


def run_shard_map(node: ir.ShardMap, ev: "interp.Evaluator") -> list:
    """The global results of `node`; `ev` evaluates the kernel-level (global) arrays."""
    mesh = node.mesh
    pes = [mesh.coords(p) for p in range(mesh.size)]
    globals_ = [ev.array(a) for a in node.args]
    order = body_nodes(node.body)
    for other in order:  # other shard_maps the body reads: global values, computed globally
        if isinstance(other, ir.ShardMap):
            ev.shard_map(other)
    evs = []
    for coords in pes:
        args = dict(ev.args)
        args.update({axis_param(a): np.int32(c) for a, c in zip(mesh.axis_names, coords)})
        for inp, value, spec in zip(node.params, globals_, node.in_specs):
            args[inp.name] = np.ascontiguousarray(value[block(value.shape, spec, mesh, coords)])
        pe = interp.Evaluator(args)
        pe.arrays = dict(ev.arrays)  # global arrays computed so far are the same on every PE
        evs.append(pe)
    for c in (n for n in order if isinstance(n, ir.Collective)):
        values = [pe.array(c.operand) for pe in evs]
        for pe, out in zip(evs, collective(c, values, mesh)):
            pe.arrays[c] = out
    outs = []
    for result, spec in zip(node.body, node.out_specs):
        outs.append(join([pe.array(result) for pe in evs], spec, mesh))
    return outs


def block(shape: tuple, spec, mesh: Mesh, coords: tuple) -> tuple:
    """The index (slices) of the block PE `coords` holds of a global array of `shape`."""
    at = dict(zip(mesh.axis_names, coords))
    index = []
    for d, n in enumerate(shape):
        entry = spec[d] if d < len(spec) else None
        if entry is None:
            index.append(slice(None))
            continue
        k = 0
        for a in entry:
            k = k * mesh.shape[a] + at[a]
        size = n // math.prod(mesh.shape[a] for a in entry)
        index.append(slice(k * size, (k + 1) * size))
    return tuple(index)


def join(values: list, spec, mesh: Mesh) -> np.ndarray:
    """The global array made of the PEs' blocks `values` (PE-id order) placed by `spec`."""
    local = values[0].shape
    stacked = np.stack(values).reshape(mesh.axis_sizes + local)
    named = spec.axes()
    for k in reversed(range(len(mesh.axis_names))):  # axes the spec leaves out: PE index 0
        if mesh.axis_names[k] not in named:
            stacked = stacked[(slice(None),) * k + (0,)]
    kept = [a for a in mesh.axis_names if a in named]
    order, shape = [], []
    for d, n in enumerate(local):
        entry = spec[d] if d < len(spec) else None
        axes = entry or ()
        order += [kept.index(a) for a in axes] + [len(kept) + d]
        shape.append(n * math.prod(mesh.shape[a] for a in axes))
    return np.ascontiguousarray(stacked.transpose(order).reshape(shape))


def body_nodes(roots) -> list:
    """The nodes the body `roots` use, each after the nodes it uses; other ShardMaps appear,
    but not the nodes of their bodies (a body only reads their global results)."""
    done, order = set(), []
    stack = [(r, False) for r in reversed(roots)]
    while stack:
        n, expanded = stack.pop()
        if expanded:
            order.append(n)
            continue
        if n in done:
            continue
        done.add(n)
        stack.append((n, True))
        if not isinstance(n, ir.ShardMap):
            stack.extend((c, False) for c in reversed(ir.children(n)) if c not in done)
    return order


def collectives_in_order(roots) -> list:
    """The Collective nodes of the body `roots`, each after the collectives it depends on."""
    return [n for n in body_nodes(roots) if isinstance(n, ir.Collective)]


def collective(node: ir.Collective, values: list, mesh: Mesh) -> list:
    """Each PE's result of the collective `node`, from each PE's operand `values`."""
    names = node.axes
    rest = [a for a in mesh.axis_names if a not in names]
    perm = [mesh.axis_names.index(a) for a in rest + list(names)]
    local = values[0].shape
    n = math.prod(mesh.shape[a] for a in names)
    stacked = np.stack(values).reshape(mesh.axis_sizes + local)
    nmesh = len(mesh.axis_sizes)
    grouped = stacked.transpose(perm + list(range(nmesh, nmesh + len(local))))
    grouped = grouped.reshape((-1, n) + local)
    with np.errstate(all="ignore"):
        out = _RULES[node.kind](grouped, n, dict(node.params), node.dtype.np)
    out = out.reshape([mesh.shape[a] for a in rest + list(names)] + list(out.shape[2:]))
    back = np.argsort(perm).tolist() + list(range(nmesh, out.ndim))
    out = np.ascontiguousarray(out.transpose(back)).reshape((mesh.size,) + out.shape[nmesh:])
    return list(out)


# Each rule maps g, of shape (groups, members, *local), to (groups, members, *result).


def _psum(g, n, p, dtype):
    return np.broadcast_to(np.add.reduce(g, axis=1, dtype=dtype)[:, None], g.shape)


def _pmax(g, n, p, dtype):
    return np.broadcast_to(g.max(axis=1)[:, None], g.shape)


def _pmin(g, n, p, dtype):
    return np.broadcast_to(g.min(axis=1)[:, None], g.shape)


def _all_gather(g, n, p, dtype):
    a = p["axis"]
    full = np.moveaxis(g, 1, 1 + a)  # (groups, *local[:a], members, *local[a:])
    if p["tiled"]:
        s = full.shape
        full = full.reshape(s[: 1 + a] + (s[1 + a] * s[2 + a],) + s[3 + a :])
    return np.broadcast_to(full[:, None], (g.shape[0], n) + full.shape[1:])


def _psum_scatter(g, n, p, dtype):
    total = np.add.reduce(g, axis=1, dtype=dtype)  # (groups, *local)
    d = p["dim"]
    if p["tiled"]:
        s = total.shape
        total = total.reshape(s[: 1 + d] + (n, s[1 + d] // n) + s[2 + d :])
    return np.moveaxis(total, 1 + d, 1)


def _ppermute(g, n, p, dtype):
    out = np.zeros_like(g)
    for src, dst in p["perm"]:
        out[:, dst] = g[:, src]
    return out


def _all_to_all(g, n, p, dtype):
    s, c = p["split"], p["concat"]
    if p["tiled"]:
        sh = g.shape
        g = g.reshape(sh[: 2 + s] + (n, sh[2 + s] // n) + sh[3 + s :])  # split into (dest, chunk)
    h = np.moveaxis(g, 2 + s, 1)  # (groups, dest, source, *rest)
    h = np.moveaxis(h, 2, 2 + c)  # source lands before dimension c of the result
    if p["tiled"]:
        sh = h.shape
        h = h.reshape(sh[: 2 + c] + (sh[2 + c] * sh[3 + c],) + sh[4 + c :])
    return h


_RULES = {
    "psum": _psum,
    "pmax": _pmax,
    "pmin": _pmin,
    "all_gather": _all_gather,
    "psum_scatter": _psum_scatter,
    "ppermute": _ppermute,
    "all_to_all": _all_to_all,
}
