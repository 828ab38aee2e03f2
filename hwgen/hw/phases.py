"""The collectives of a mesh PE. Each collective (loops.Collective, a leaf of the program's
root sequence: a `Stage` in the controller tree) runs its phases one after another:
RingCollective units (collective.py), and BlockCopy units (copy.py) for the block an
all-to-all or a permutation keeps, e.g. a psum over two axes of a 2x4 torus as a
reduce-scatter along the first, an all-reduce along the second and an all-gather along the
first, or over both axes of a square torus as one phase on its tours (mesh/hardware.py plans
them). Each phase unit (`ring<k>`, numbered over all collectives) is
a read and a write client of the PE's DRAM arbiter; a phase reads the array the program
stored or one an earlier phase wrote (its plan's `src`: a reduction's phase k reads phase
k - 1's, a permute's phases read the operand or a route's scratch array), and the last
writes the collective's result, which the program may read after it.

Every phase runs along one mesh axis a (a unit of several groups: each group along its own;
torus tours: below),
on the PE's links of that axis: one pair per direction, `<a>_next_tx` / `<a>_prev_rx` (to
and from the neighbours at coordinate +1 and -1 along a) and, when some phase on a runs both
ways, `<a>_prev_tx` / `<a>_next_rx`. The phases on one axis share its links: one phase runs
at a time, and an idle unit neither shows a word to a link nor takes one, so the streams are
combined with ORs. A unit on the torus tours (`RingPlan.tour`) uses the links of both its
axes: at a turn of its tour (a PE whose coordinates along them sum to 0 or k - 1, mod k) an
engine goes along the other axis (collective.engine_ports), so its streams are chosen by the
PE's coordinates; the two tours never use one link on one PE.

Members a PE gains (`members`): `pe_<a>: In` its coordinate along each axis a phase uses
(a unit's `pe_x` is computed from them: its position in the ring),
`base_<dst>: In(addr)` for every phase's result array, and the links. A phase whose plan has
a `src_shift` (`dst_shift`) reads (writes) block (x + shift) mod p of its array, x being the
PE's coordinate along the phase's axis. On a zigzag ring (a plan's `order`: a mesh without
wraparound) a unit's `pe_x` is the PE's position x in the ring instead, and those blocks are
order[(x + shift) mod p]. A shift may also be a tuple of such terms, one per axis of an
all-to-all over several axes, numbering the block row-major over them
(collective.blocks_of).
"""

from __future__ import annotations

import math

from amaranth.hdl import Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..affine import to_affine
from .collective import RingCollective, engine_ports, masked
from .copy import BlockCopy, CopyPlan
from .counters import port_name
from .link import LinkRx, LinkTx, link_signature


def link_pairs(rings) -> list:
    """The PE's links some phase's engine uses, in order of first use: (sending port,
    receiving port) pairs, `<a>_next_tx` with `<a>_prev_rx` (the link to the next PE along a
    and the one from the previous) and `<a>_prev_tx` with `<a>_next_rx`."""
    out = []
    for r in rings:
        if isinstance(r, CopyPlan):
            continue
        for h in range(r.engines):
            for q in (q for ports in engine_ports(r, h) for q in ports):
                pair = _pair(q.name)
                if pair not in out:
                    out.append(pair)
    return out


def _pair(port: str) -> tuple:
    """The (sending, receiving) port pair of link port `port` (see link_pairs)."""
    axis, way, _ = port.rsplit("_", 2)
    tx_way = way if port.endswith("_tx") else {"next": "prev", "prev": "next"}[way]
    rx_way = {"next": "prev", "prev": "next"}[tx_way]
    return f"{axis}_{tx_way}_tx", f"{axis}_{rx_way}_rx"


def members(rings, addr_bits: int) -> dict:
    """The PE's members for collective phases `rings` (see the module doc)."""
    out = {}
    for r in rings:
        for a in getattr(r, "axes", ()) or (r.axis,):
            out[f"pe_{a}"] = In(range(r.p))
        for a, q in r.rx_axes:
            out[f"pe_{a}"] = In(range(q))
        for shift in (r.src_shift, r.dst_shift):
            for a, q, _, _ in shift if isinstance(shift, tuple) else ():
                out[f"pe_{a}"] = In(range(q))
        out[f"base_{r.dst}"] = In(addr_bits)
    bits, lanes = rings[0].dtype.bits, _lanes(rings)
    for tx, rx in link_pairs(rings):
        out[tx] = Out(link_signature(bits, lanes))
        out[rx] = In(link_signature(bits, lanes))
    return out


def units(rings, dram, word_bits: int) -> list:
    """The unit of each phase: a RingCollective, or a BlockCopy for a CopyPlan."""
    return [
        BlockCopy(r, dram.words_per_cycle, word_bits, dram.addr_bits, dram.latency)
        if isinstance(r, CopyPlan)
        else RingCollective(r, dram.words_per_cycle, word_bits, dram.addr_bits)
        for r in rings
    ]


class Stage(wiring.Component):
    """A collective (loops.Collective) in the PE's controller tree: its go and done. Its
    phases are wired in the PE (`elaborate`), which shares their links and DRAM clients with
    the other collectives': `run` starts the first phase, `finished` is the last one's done.
    A collective stage of a tile loop (`coll.offset`, affine in the loop's counters, which
    come in as `ctr_<name>`) gives its phases the words of its iteration: `offset`."""

    def __init__(self, coll, outer: dict, addr_bits: int):
        members = {"go": In(1), "done": Out(1), "run": Out(1), "finished": In(1), "offset": Out(addr_bits)}
        self.terms = dict(to_affine(coll.offset).terms) if coll.offset is not None else {}
        self.outer_used = tuple(self.terms)
        for n in self.outer_used:
            members[f"ctr_{port_name(n)}"] = In(range(max(2, outer[n])))
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        m.d.comb += [self.run.eq(self.go), self.done.eq(self.finished)]
        offset = Const(0, 1)
        for n, k in self.terms.items():
            offset = offset + getattr(self, f"ctr_{port_name(n)}") * k
        m.d.comb += self.offset.eq(offset)
        return m


def elaborate(m, pe, stages: list, bases: dict) -> None:
    """Wire the collectives' phases into PE `pe` (its members as above). `stages`: per
    collective, (its Stage, its phases' plans, their units); phase 0 starts on the Stage's
    run, phase k + 1 when phase k is done, the Stage is finished with the last. `bases` maps
    the program's arrays to their base registers."""
    rings = [r for _, rs, _ in stages for r in rs]
    colls = [c for _, _, cs in stages for c in cs]
    dst = {}
    for r in rings:
        if r.dst in dst or r.dst in bases:  # phases writing one array; an array the program reads
            continue
        dst[r.dst] = Signal(pe.dram.addr_bits, name=f"base_{r.dst}_q")
        with m.If(pe.start & ~pe.busy):
            m.d.sync += dst[r.dst].eq(getattr(pe, f"base_{r.dst}"))
    dst.update(bases)
    k = 0
    for stage, rs, cs in stages:
        go = stage.run
        for r, coll in zip(rs, cs):
            m.submodules[f"ring{k}"] = coll
            k += 1
            x = _ring_position(pe, r, 0)
            block = r.words if isinstance(r, CopyPlan) else r.n // r.p
            m.d.comb += [
                coll.go.eq(go),
                coll.src_base.eq(dst[r.src] + _blocks(pe, x, r.src_shift, r, block) + stage.offset),
                coll.dst_base.eq(dst[r.dst] + _blocks(pe, x, r.dst_shift, r, block) + stage.offset),
            ]
            m.d.comb += coll.pe_x.eq(x)
            if masked(r):
                m.d.comb += coll.receives.eq(_receives(pe, r))
            for g in range(1, getattr(r, "groups", 1)):
                m.d.comb += getattr(coll, f"pe_x{g}").eq(_ring_position(pe, r, g))
            go = coll.done
        m.d.comb += stage.finished.eq(go)
    _links(m, pe, [(r, c) for r, c in zip(rings, colls) if not isinstance(r, CopyPlan)])


def _links(m, pe, units: list) -> None:
    """A LinkTx and a LinkRx for each link pair the ring `units` ((plan, unit) pairs) use,
    shared by every engine that uses them (see _share)."""
    plans = [r for r, _ in units]
    if not plans:  # block copies only: no link is used
        return
    bits, lanes = plans[0].dtype.bits, _lanes(plans)
    users = {}  # port -> [(plan, the engine's stream, the PE is one it uses the port on: None for all)]
    for r, c in units:
        for h in range(r.engines):
            sends, receives = engine_ports(r, h)
            for q in sends:
                users.setdefault(q.name, []).append((r, getattr(c, f"tx{h}"), _when(pe, r, q)))
            for q in receives:
                users.setdefault(q.name, []).append((r, getattr(c, f"rx{h}"), _when(pe, r, q)))
    ends = {}  # port -> the stream of its LinkTx's input or its LinkRx's output
    for txname, rxname in link_pairs(plans):
        txs, rxs = users.get(txname, []), users.get(rxname, [])
        depth, latency = max(r.depth for r, _, _ in txs + rxs), (txs + rxs)[0][0].latency
        m.submodules[txname] = tx = LinkTx(bits, lanes, depth, latency)
        m.submodules[rxname] = rx = LinkRx(bits, lanes, depth, latency)
        ends[txname], ends[rxname] = tx.i, rx.o
        wiring.connect(m, tx.link, wiring.flipped(getattr(pe, txname)))
        wiring.connect(m, wiring.flipped(getattr(pe, rxname)), rx.link)
    _share(m, users, ends)


def _receives(pe, r):
    """Whether PE `pe` is one of the phase's `receivers` (a bit per PE of its rx_axes,
    numbered row-major by coordinate)."""
    index, stride = Const(0, 1), 1
    for a, q in reversed(r.rx_axes):
        index = index + getattr(pe, f"pe_{a}") * stride
        stride *= q
    return (Const(r.receivers % (1 << stride), stride) >> index)[0]


def _lanes(rings) -> int:
    """Words per link beat: the ring phases' (all of one mesh's links, so one value; 1
    without any)."""
    lanes = {r.lanes for r in rings if not isinstance(r, CopyPlan)}
    if len(lanes) > 1:
        raise ValueError(f"the ring phases of one PE share its links: one link width, not {sorted(lanes)}")
    return lanes.pop() if lanes else 1


def _position(coord, order: tuple):
    """The PE's position in a ring of `order` (the coordinates in ring order; () for 0, 1,
    ...) from its coordinate `coord` along the ring's axis."""
    if not order:
        return coord
    out = Const(0, 1)
    for c, at in enumerate(order):
        out = Mux(coord == at, c, out)
    return out


def _blocks(pe, x, shift, r, block: int):
    """The word offset of the block phase `r` reads or writes at `shift` (its src_shift or
    dst_shift, see collective.blocks_of) on PE `pe`, x being its position along r's axis: a
    tuple of terms numbers the block row-major over the terms' axes, each by _offset."""
    if not isinstance(shift, tuple):
        return _offset(x, shift, r.p, block, r.order)
    out, stride = Const(0, 1), block
    for a, q, k, order in reversed(shift):
        out = out + _offset(_position(getattr(pe, f"pe_{a}"), order), k, q, stride, order)
        stride *= q
    return out


def _offset(x, shift, p: int, block: int, order: tuple):
    """b * block words, b = ((x + shift) mod p) (order[that] on a zigzag ring), for the PE's
    position x in the ring of the phase's axis (0 when the phase's array is not in blocks:
    shift None)."""
    if shift is None:
        return Const(0, 1)
    out = Const(0, 1)
    for c in range(p):
        b = (c + shift) % p
        out = Mux(x == c, (order[b] if order else b) * block, out)
    return out


def _share(m, users: dict, ends: dict) -> None:
    """Connect the engines' streams to the link ends `ends` (port -> a LinkTx's input or a
    LinkRx's output) they use (`users`: port -> [(plan, stream, when)]). At most one engine
    uses a port at a time (one phase runs at a time, and the two tours of a unit use each of
    the PE's links once), so a sending port takes the OR of its engines' streams, each
    engine's send stream is ready when the port it uses on this PE is, and a receiving
    port's output goes to every engine that may use it."""
    ready = {}  # an engine's stream -> what its ready (send) or valid (receive) is
    for port, streams in users.items():
        end = ends[port]
        if port.endswith("_tx"):
            valid, payload = Const(0, 1), Const(0, len(end.payload.as_value()))
            for _, t, when in streams:
                v = t.valid if when is None else t.valid & when
                valid, payload = valid | v, Mux(v, t.payload.as_value(), payload)
                ready.setdefault(id(t), [t, "ready", []])[2].append((end.ready, when))
            m.d.comb += [end.valid.eq(valid), end.payload.eq(payload)]
        else:
            taken = Const(0, 1)
            for _, r, when in streams:
                taken = taken | (r.ready if when is None else r.ready & when)
                ready.setdefault(id(r), [r, "valid", []])[2].append((end, when))
            m.d.comb += end.ready.eq(taken)
    for s, field, ends_of in ready.values():
        if field == "ready":
            value = Const(0, 1)
            for r, when in ends_of:
                value = r if when is None else Mux(when, r, value)
            m.d.comb += s.ready.eq(value)
            continue
        valid, payload = Const(0, 1), Const(0, len(s.payload.as_value()))
        for end, when in ends_of:
            valid = end.valid if when is None else Mux(when, end.valid, valid)
            payload = end.payload if when is None else Mux(when, end.payload.as_value(), payload)
        m.d.comb += [s.valid.eq(valid), s.payload.eq(payload)]


def _when(pe, r, q):
    """None when the engine of plan `r` uses link port `q` on every PE; else whether it uses it
    on PE `pe` (a torus tour's turn: the PE's coordinates along the plan's axes sum to q.diag,
    mod their size, or not)."""
    if q.diag is None:
        return None
    k = math.isqrt(r.p)
    total = getattr(pe, f"pe_{r.axes[0]}") + getattr(pe, f"pe_{r.axes[1]}")
    at = (total == q.diag) | (total == q.diag + k)
    return at if q.on else ~at


def _ring_position(pe, r, g: int):
    """The position of PE `pe` in the ring of group g of phase `r`: its coordinate along the
    group's axis (its place in a zigzag ring's `order`), or its place in a torus tour
    (collective.tour_position)."""
    axes = getattr(r, "axes", ()) or (r.axis,)
    if getattr(r, "tour", False):
        k = math.isqrt(r.p)
        ca, cb = getattr(pe, f"pe_{axes[g]}"), getattr(pe, f"pe_{axes[1 - g]}")
        total = ca + cb
        return cb * k + Mux(total >= k, total - k, total)
    return _position(getattr(pe, f"pe_{axes[g]}"), r.order)
