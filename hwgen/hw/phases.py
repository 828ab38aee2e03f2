"""The collectives of a mesh PE. Each collective (loops.Collective, a leaf of the program's
root sequence: a `Stage` in the controller tree) runs its phases one after another:
RingCollective units (collective.py), and BlockCopy units (copy.py) for the block an
all-to-all or a permutation keeps, e.g. a psum over two axes of a torus as a reduce-scatter
along the first, an all-reduce along the second and an all-gather along the first
(mesh/hardware.py plans them). Each phase unit (`ring<k>`, numbered over all collectives) is
a read and a write client of the PE's DRAM arbiter; a phase reads the array the program
stored or one an earlier phase wrote (its plan's `src`: a reduction's phase k reads phase
k - 1's, a permute's phases read the operand or a route's scratch array), and the last
writes the collective's result, which the program may read after it.

Every phase runs along one mesh axis a (a unit of several groups: each group along its own),
on the PE's links of that axis: one pair per direction, `<a>_next_tx` / `<a>_prev_rx` (to
and from the neighbours at coordinate +1 and -1 along a) and, when some phase on a runs both
ways, `<a>_prev_tx` / `<a>_next_rx`. The phases on one axis share its links: one phase runs
at a time, and an idle unit neither shows a word to a link nor takes one, so the streams are
combined with ORs.

Members a PE gains (`members`): `pe_<a>: In` its coordinate along each axis a phase uses,
`base_<dst>: In(addr)` for every phase's result array, and the links. A phase whose plan has
a `src_shift` (`dst_shift`) reads (writes) block (x + shift) mod p of its array, x being the
PE's coordinate along the phase's axis. On a zigzag ring (a plan's `order`: a mesh without
wraparound) a unit's `pe_x` is the PE's position x in the ring instead, and those blocks are
order[(x + shift) mod p]. A shift may also be a tuple of such terms, one per axis of an
all-to-all over several axes, numbering the block row-major over them
(collective.blocks_of).
"""

from __future__ import annotations

from amaranth.hdl import Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..affine import to_affine
from .collective import RingCollective, masked, ring_links
from .copy import BlockCopy, CopyPlan
from .counters import port_name
from .link import LinkRx, LinkTx, link_signature


def axes_links(rings) -> dict:
    """axis -> [(sending port, receiving port)] for every direction some phase uses."""
    out = {}
    for r in rings:
        if isinstance(r, CopyPlan):
            continue
        for h, pair in enumerate(ring_links(r)):
            if pair not in out.setdefault(r.engine_axis(h), []):
                out[r.engine_axis(h)].append(pair)
    return out


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
    for links in axes_links(rings).values():
        for tx, rx in links:
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
            x = _position(getattr(pe, f"pe_{r.axis}"), r.order)
            block = r.words if isinstance(r, CopyPlan) else r.n // r.p
            m.d.comb += [
                coll.go.eq(go),
                coll.src_base.eq(dst[r.src] + _blocks(pe, x, r.src_shift, r, block) + stage.offset),
                coll.dst_base.eq(dst[r.dst] + _blocks(pe, x, r.dst_shift, r, block) + stage.offset),
            ]
            m.d.comb += coll.pe_x.eq(x)
            if masked(r):
                m.d.comb += coll.receives.eq(_receives(pe, r))
            for g, a in enumerate(getattr(r, "axes", ())[1:], 1):
                m.d.comb += getattr(coll, f"pe_x{g}").eq(_position(getattr(pe, f"pe_{a}"), r.order))
            go = coll.done
        m.d.comb += stage.finished.eq(go)
    bits = rings[0].dtype.bits
    for links in axes_links(rings).values():
        on = [(r, c) for r, c in zip(rings, colls) if not isinstance(r, CopyPlan)]
        for pair in links:
            txname, rxname = pair
            users = [(r, c, h) for r, c in on for h, q in enumerate(ring_links(r)) if q == pair]
            depth, latency = max(r.depth for r, _, _ in users), users[0][0].latency
            users = [(c, h) for _, c, h in users]
            m.submodules[f"{txname}"] = tx = LinkTx(bits, _lanes(rings), depth, latency)
            m.submodules[f"{rxname}"] = rx = LinkRx(bits, _lanes(rings), depth, latency)
            txs = [getattr(c, f"tx{h}") for c, h in users]
            _share(m, txs, tx.i, [getattr(c, f"rx{h}") for c, h in users], rx.o)
            wiring.connect(m, tx.link, wiring.flipped(getattr(pe, txname)))
            wiring.connect(m, wiring.flipped(getattr(pe, rxname)), rx.link)


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


def _share(m, txs: list, link_in, rxs: list, link_out) -> None:
    """The units' send streams `txs` into one link sender's input, and one receiver's output
    to the units' receive streams `rxs` (at most one unit is active at a time)."""
    valid, payload, ready = Const(0, 1), Const(0, len(link_in.payload.as_value())), Const(0, 1)
    for t in txs:
        valid = valid | t.valid
        payload = Mux(t.valid, t.payload.as_value(), payload)
        m.d.comb += t.ready.eq(link_in.ready)
    for r in rxs:
        ready = ready | r.ready
        m.d.comb += [r.valid.eq(link_out.valid), r.payload.eq(link_out.payload)]
    m.d.comb += [link_in.valid.eq(valid), link_in.payload.eq(payload), link_out.ready.eq(ready)]
