"""Collective units of a mesh PE: `RingCollective`, an all-reduce, reduce-scatter or all-gather
over a ring, one way round or both.

The unit is a client of the PE's DRAM arbiter (one read client, one write client, like a
LoadUnit and a StoreUnit) and drives one ring link pair per direction (LinkTx / LinkRx,
hw/link.py). Every PE runs the same unit; its ring coordinate x (`pe_x`, an input port) is
sampled at `go`. On a ring that is not in coordinate order (`RingPlan.order`: the zigzag ring
of a mesh without wraparound, one way round) x is the PE's position in the ring, and chunk c
is the block of the PE at position c: block order[c] in DRAM.

Data: the whole vector has `n` words in p blocks, block c for PE c. The operand is at
`src_base` in DRAM: every block (all-reduce, reduce-scatter) or the PE's own block x
(all-gather); the result goes to `dst_base`: every block (all-reduce, all-gather) or block x,
reduced (reduce-scatter). With `dirs` = 2 (a bidirectional ring) the first half of every
block goes round one way (engine 0: to the next PE, x + 1, from the previous one) and the
second half the other way (engine 1: to the previous PE, from the next one), each on its own
links. A unit of G > 1 *groups* (`RingPlan.axes`, one axis each, all of p PEs) runs G such
rings at once, group g on axis g's links and on the g-th of G equal parts of the operand and
result arrays (each laid out as above), its engines g * dirs .. g * dirs + dirs - 1, its
coordinate `pe_x` (g = 0) or `pe_x<g>`: the torus all-reduce's dimension orders at once. A
two-axis reduce-scatter's operand or all-gather's result is instead *spread* (`spread`): its
groups' parts are the g-th pieces of every final block (see spread_addr). An all-reduce over
both axes of a k x k torus may instead run as two *tours* (`RingPlan.tour`): each group a
ring through all p = k * k PEs (tour_position), `pe_x<g>` the PE's position in it; which of
the PE's links an engine uses then depends on the PE (engine_ports; hw/phases.py wires it).
A reduce-scatter or all-gather over both axes runs on the tours too: its array of every block
keeps JAX's blocks, chunk c of group g being the g-th part of the block of the PE at position
c of its tour (tour_block).
An engine's chunk c is its half of block c (C words); a slice is S words of a chunk; round j
works on the slices j*S .. j*S + S - 1 of every chunk. Chunk arithmetic is mod p and goes down
for engine 0 (chunk(k) = x - k) and up for engine 1 (chunk(k) = x + k).

    LOAD    the operand streams in item by item, an item being one slice of one chunk in the
            order its engine reads them: round by round, chunks chunk(1), chunk(2), ...,
            chunk(p) (chunk(0) only, for an all-gather); items of the engines alternate.
            One read request per cycle, each response written to its row of the engine's
            operand memory (rows of the W words of a DRAM beat, the whole vector's chunks in
            order).
            The ring starts once every engine's first two items are in; the rest arrive at
            W / E words a cycle per engine (E engines), ahead of the ring (it reads at most
            one word a cycle) when W >= 2 E; an all-reduce's also with W = E (it reads p
            items per engine in a round of 2p - 2 steps, and the two items' head start covers
            the p read in a round's first p - 1 steps). A word waits until its item is in, and a round's counters move
            on at its last pop even when the next round's send still waits, so a slower load
            only delays the ring. When a slice is not a whole number of beats, the operand is read whole
            first (chunk by chunk; for a one-way all-reduce whose chunks are not whole beats
            either, in order).
    RING    R = C / S rounds, each of T steps (T = 2p - 2 for an all-reduce, p - 1 for the
            others). Per engine two parts:
      send  step 0: push the S words of chunk(1) (all-gather: chunk(0), its own) to the
            link, one per cycle; round j + 1's runs during round j's last step (which never
            sends; the send part has a read port of its own)
      fwd   once its round's step 0 is sent, pop the T S words the upstream PE sends, in
            order; step s's words belong to chunk(s + 2) (all-gather: chunk(s + 1)):
              all-reduce       s < p - 2: reduce-scatter, send (received op local) on;
                               s = p - 2: the chunk is reduced, keep it and send it on;
                               p - 2 < s < 2p - 3: all-gather, keep it and send it on;
                               s = 2p - 3: keep it
              reduce-scatter   s < p - 2: send (received op local) on; s = p - 2: keep
                               (received op local), the PE's own chunk(0)
              all-gather       s < p - 2: keep it and send it on; s = p - 2: keep it
            A word that needs the local value waits until its item is loaded (never, with
            fixed DRAM latency).
    DRAIN   wait until every word sent has left for the link
    STORE   wait until the result is written to dst_base: a store part (a read port of
            each engine's result memory) writes each slice of the result once it is final
            (a step that keeps it ends; the own slice of an all-gather when its round
            starts), one beat per cycle from three cycles after its last word is popped, the
            engines' slices in turn; when the operand was read whole, the whole result once
            the ring is done

A popped (or, by the send part, a read) word reads the operand memory in cycle t; in t + 1
the ALU (`op`: wrapping add, signed/unsigned max or min, one LUT level of logic, no register)
combines it and pushes the result into a 4-deep link FIFO, and in t + 2 it is written to the
result memory (each memory has one write port, so both map to block RAM; an all-gather's
store reads its own slices from the operand memory). Words are popped or read only while
that FIFO, counting the words in flight, has room, so the link's backpressure never loses a
word.

Timing (model.ring_collective_cycles restates it; simulation checks it to the cycle). DRAM
latency Lm, link latency L, W words per DRAM beat, F = L + RING_HOP (4) the hop from a PE's
pop of a word to its neighbour's pop of the word it sends on: popped in t, pushed in t + 1,
into LinkTx in t + 2, on the wire from t + 3, in the receiver's output register L cycles
later, popped in t + 4 + L. Every PE runs the same timeline (SPMD, same DRAM latency) and
both engines run in step, so:

    go -> first send     first + Lm + RING_LOAD (4), first = RingPlan.first_beats: BASES,
                         then one request per cycle, each answered Lm + 2 cycles later
                         through the arbiter's registers
    one round            T * max(S, F), from its first send to the next round's
    the last round       + S: its last step's S words
    last pop -> done     last + RING_STORE (6), last = RingPlan.last_beats: one row read and
                         one DRAM write per cycle; done once the channel has taken the last

The receive FIFO holds D >= S + L + 2 words, so credits never stall the sender (the step-0
words wait in the FIFO until its owner pops them; their credits take L cycles back), and a
slice S <= D cannot deadlock (every PE's step 0 fits in its neighbour's FIFO).

Wide links (`RingPlan.lanes` = w > 1 words a link beat): everything above that moves one word
a cycle on the ring side moves a beat of w words (the pop, the operand memory's read of the
w words in one row, the w-lane ALU, the FIFO to the link, the write of w words of a result
row), so a slice of S words takes S / w cycles: the timing above with S counted in beats.
Slices are whole beats and w divides the DRAM beat.

Members: go, done, pe_x: In, src_base, dst_base: In(addr), rd_req, rd_resp, wr, wr_sent
(the arbiter client ports), and per engine h: tx<h>: Out(beat_stream) (to its LinkTx.i),
rx<h>: In(beat_stream) (from its LinkRx.o).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from amaranth.hdl import Cat, Const, Module, Mux, Signal, unsigned
from amaranth.lib import wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from . import memchannel
from .link import beat_stream

OPS = ("add", "max", "min")


@dataclass(frozen=True)
class RingPlan:
    """A PE's ring collective (`kind`: "all_reduce", "reduce_scatter" or "all_gather") of a
    vector of `n` words of `dtype` over `p` PEs with operation `op`, from the DRAM array `src`
    (the body's result) to the DRAM array `dst` (the kernel's result), in slices of `slice`
    words, over `dirs` directions (1: one way; 2: half of every block each way) of links of
    `latency` cycles with receive FIFOs of `depth` beats (see RingCollective)."""

    n: int
    p: int
    slice: int
    depth: int
    latency: int
    op: str
    dtype: object
    src: str
    dst: str
    dirs: int = 1
    kind: str = "all_reduce"
    axis: str = "x"  # the mesh axis the ring runs along (its link port names)
    hops: int = 0  # a permute's: how far each block goes (along engine 0's way)
    reverse: bool = False  # a one-way permute whose engine sends to the previous PE
    receivers: int = -1  # a permute's destinations, a bit per PE of rx_axes (-1: all; the others get zeros)
    quiet: bool = False  # a permute whose non-receivers write nothing (instead of zeros)
    rx_axes: tuple = ()  # (axis, size) pairs whose PEs `receivers` numbers (row-major, by coordinate)
    src_shift: int | tuple | None = None  # operand: block (x + src_shift) mod p of p blocks (see blocks_of)
    dst_shift: int | tuple | None = None  # result: block (x + dst_shift) mod p of p blocks (see blocks_of)
    axes: tuple = ()  # a unit of several groups: each group's axis (axes[0] == axis)
    order: tuple = ()  # the ring's coordinates in ring order (a zigzag ring), () for 0 .. p - 1
    lanes: int = 1  # words per link beat (the link's words_per_cycle): words moved per cycle
    spread: tuple = ()  # per group, (chunk stride, piece stride) of the array of every block (spread_addr)
    tour: bool = False  # two groups on the torus tours of `axes` (see tour_position), not along one axis each

    @property
    def groups(self) -> int:
        """Rings the unit runs at once, each on its own axis and part of the vector."""
        return max(1, len(self.axes))

    @property
    def engines(self) -> int:
        """Engines of the unit: `dirs` per group."""
        return self.dirs * self.groups

    def engine_axis(self, h: int) -> str:
        return self.axes[h // self.dirs] if self.axes else self.axis

    @property
    def half(self) -> int:
        """Words per engine of the whole (reduced or gathered) vector."""
        return self.n // self.engines

    @property
    def steps(self) -> int:
        """Steps a round pops: reduce-scatter then all-gather, one of them, or a permute's hops."""
        if self.kind == "permute":
            return self.hops
        return 2 * self.p - 2 if self.kind == "all_reduce" else self.p - 1

    @property
    def ways(self) -> tuple:
        """Each engine's way round: +1 sends to the next PE of its ring (along its axis, or its
        torus tour), -1 to the previous."""
        return ((1, -1) if self.dirs == 2 else ((-1,) if self.reverse else (1,))) * self.groups

    @property
    def loads_all(self) -> bool:
        """Whether the operand has every chunk (else only the PE's own: all-gather, permute)."""
        return self.kind in ("all_reduce", "reduce_scatter")

    @property
    def stores_all(self) -> bool:
        """Whether the result has every chunk (else one: reduce-scatter, permute)."""
        return self.kind in ("all_reduce", "all_gather")

    @property
    def src_words(self) -> int:
        """Words of the operand on a PE (all p blocks when it reads one of them: src_shift)."""
        block = self.n // self.p
        return self.n if self.loads_all else block * blocks_of(self.src_shift, self.p)

    @property
    def dst_words(self) -> int:
        """Words of the result on a PE (all p blocks when it writes one of them: dst_shift)."""
        block = self.n // self.p
        return self.n if self.stores_all else block * blocks_of(self.dst_shift, self.p)

    def by_chunk(self, words: int) -> bool:
        """Whether the DRAM side moves whole chunks (each a whole number of beats), in the
        engines' chunk order; else (one way, all-reduce) the vector in order."""
        return self.dirs > 1 or self.kind != "all_reduce" or self.chunk % words == 0

    @property
    def chunk(self) -> int:
        return self.half // self.p

    @property
    def rounds(self) -> int:
        return self.chunk // self.slice

    @property
    def beats(self) -> int:
        """Link beats (cycles on the link) of a slice: S / lanes."""
        return self.slice // self.lanes

    def streams(self, words: int) -> bool:
        """Whether the operand streams in slice by slice (see RingCollective): slices of
        whole DRAM beats."""
        return self.slice % words == 0

    def load_items(self) -> int:
        """Slices of the operand per engine and round."""
        return self.p if self.loads_all else 1

    def first_beats(self, words: int) -> int:
        """DRAM beats read before the ring starts: two slices per engine (one when there is
        only one) when streaming, else the whole operand."""
        if self.streams(words):
            return min(2, self.rounds * self.load_items()) * self.engines * self.slice // words
        return self.n // words // (1 if self.loads_all else self.p)

    def last_beats(self, words: int) -> int:
        """DRAM beats written after the last pop: every engine's last slice when streaming,
        else the whole result."""
        if self.streams(words):
            return self.engines * self.slice // words
        return self.n // words // (1 if self.stores_all else self.p)


def spread_piece(plan: RingPlan) -> int:
    """Words of a piece of a spread array (see spread_addr): a block of the final p x p has G."""
    return plan.n // (plan.p * plan.p * plan.groups)


def spread_addr(plan: RingPlan, g: int, c: int, o: int) -> int:
    """Where a spread plan keeps word o of group g's chunk c in its array of every block (a
    two-axis reduce-scatter's operand, or all-gather's result, run in both dimension orders at
    once). That array is the collective's whole vector in p x p final blocks of F words (PE
    (a, b) of the two axes ends with, or starts from, block a * p + b), each final block cut
    into G pieces of P = F / G words, group g working on the g-th of each. Group g's chunk c
    is p of its pieces, piece t of the chunk in final block x * cs + t * ps ((cs, ps) =
    spread[g]: (p, 1) when the group's ring runs along the first axis, (1, p) along the
    second; x the coordinate at ring position c: order[c] on a zigzag ring, else c), so word
    o of the chunk is word o mod P of piece o // P. RingCollective computes the same in
    hardware (_Turns.dram_addr): tests/test_spread.py checks this map, the mesh tests the
    hardware's results."""
    P = spread_piece(plan)
    cs, ps = plan.spread[g]
    x = plan.order[c] if plan.order else c
    return (x * cs + (o // P) * ps) * P * plan.groups + g * P + o % P


def tour_position(ca: int, cb: int, k: int) -> int:
    """The position in the torus tour along axis a (then b) of the PE at coordinates ca, cb of
    a k x k torus: the tour steps +1 along a, except from a PE on the diagonal ca + cb = k - 1
    (mod k), where it steps +1 along b. It visits row cb = 0, 1, ... in turn, each whole, from
    its PE with ca + cb = 0 (mod k), so it is a ring through all k * k PEs, and the tours along
    (a, b) and along (b, a) share no link: a unit of two groups runs an all-reduce over both
    axes as one ring phase on all four links of every PE (`RingPlan.tour`)."""
    return cb * k + (ca + cb) % k


def along(plan) -> str:
    """Where a phase (a RingPlan or a CopyPlan) runs, for messages: "along 'x'", or "along 'x'
    and 'y'" for a unit of several groups ("(torus tours)" when they are the tours)."""
    axes = getattr(plan, "axes", ()) or (plan.axis,)
    tours = " (torus tours)" if getattr(plan, "tour", False) else ""
    return "along " + " and ".join(f"'{a}'" for a in axes) + tours


def tour_block(plan: RingPlan, g: int, c: int) -> int:
    """The block of the PE at position c of group g's tour (tour_position; group g along
    axes[g], turning along the other), numbered over the plan's two axes in their order, the
    first major (as JAX numbers a group): a reduce-scatter's or all-gather's chunk c of group g
    is that block's part."""
    k = math.isqrt(plan.p)
    cb = c // k
    coord = {plan.axes[g]: (c - cb) % k, plan.axes[1 - g]: cb}
    return coord[plan.axes[0]] * k + coord[plan.axes[1]]


@dataclass(frozen=True)
class LinkPort:
    """A link port an engine uses: on every PE (`diag` None), or only on the PEs whose
    coordinates along the plan's two axes sum to `diag` (mod their size; `on`), or on all
    the others (not `on`): the turns of a torus tour."""

    name: str
    diag: int | None = None
    on: bool = True


def engine_ports(plan: RingPlan, h: int) -> tuple:
    """(sends, receives) of engine h: the LinkPorts it sends to and receives from. An engine of
    way +1 along axis a sends to the next PE (coordinate + 1, port `<a>_next_tx`) and receives
    from the previous one (`<a>_prev_rx`); of way -1 the other way round. An engine of a tour
    (group g along a = axes[g], turning along b, the other axis, tour_position) goes along b
    instead where its tour turns: it sends along b on the diagonal k - 1 (way +1; way -1: 0)
    and receives along b on the diagonal 0 (way -1: k - 1)."""
    way, a = plan.ways[h], plan.engine_axis(h)
    ahead, back = ("next", "prev") if way > 0 else ("prev", "next")
    if not plan.tour:
        return (LinkPort(f"{a}_{ahead}_tx"),), (LinkPort(f"{a}_{back}_rx"),)
    b, k = plan.axes[1 - h // plan.dirs], math.isqrt(plan.p)
    turn_out, turn_in = (k - 1, 0) if way > 0 else (0, k - 1)
    sends = (LinkPort(f"{b}_{ahead}_tx", turn_out), LinkPort(f"{a}_{ahead}_tx", turn_out, False))
    receives = (LinkPort(f"{b}_{back}_rx", turn_in), LinkPort(f"{a}_{back}_rx", turn_in, False))
    return sends, receives


def blocks_of(shift, p: int) -> int:
    """Blocks in the array a phase reads or writes at `shift` (its plan's src_shift or
    dst_shift): one for None (the array is one block), p for an int k (block (x + k) mod p,
    x the PE's position along the phase's axis), and the product of the sizes for a tuple of
    terms (axis, size, k, order) (the block numbered row-major over the terms by each axis'
    block (x_axis + k) mod size, order[that] on a zigzag ring: an all-to-all over several
    axes; hw/phases.py computes the offsets)."""
    if shift is None:
        return 1
    if isinstance(shift, tuple):
        return math.prod(q for _, q, _, _ in shift)
    return p


def masked(plan) -> bool:
    """Whether some PEs of a permute or copy phase receive nothing (`receivers`, a bit per PE
    of its `rx_axes`, which it must then name): its unit then has a `receives` input, high on
    the PEs that do."""
    if plan.kind not in ("permute", "copy") or plan.receivers == -1:
        return False
    pes = 1
    for _, q in plan.rx_axes:
        pes *= q
    if not plan.rx_axes or plan.receivers >> pes:
        raise ValueError(f"receivers {plan.receivers:#x} need rx_axes numbering at least as many PEs")
    return True


def phase_members(plan, addr_bits: int, data_bits: int, words: int) -> dict:
    """The members every collective phase unit has (hw/phases.py wires them): go, done, the
    PE's coordinate along its axis of p PEs, its arrays' bases, its arbiter client ports, and
    `receives` when the plan is masked."""
    p = plan.p
    return {
        **({"receives": In(1)} if masked(plan) else {}),
        "go": In(1),
        "done": Out(1),
        "pe_x": In(range(p)),
        "src_base": In(addr_bits),
        "dst_base": In(addr_bits),
        "rd_req": Out(memchannel.read_request(addr_bits)),
        "rd_resp": In(memchannel.read_response(data_bits)),
        "wr": Out(memchannel.write(addr_bits, data_bits, words)),
        "wr_sent": In(1),
    }


OUT_FIFO = 4  # words between the ALU and the link sender
STATES = ("IDLE", "BASES", "LOAD", "RING", "DRAIN", "STORE")
KINDS = ("all_reduce", "reduce_scatter", "all_gather", "permute")


class RingCollective(wiring.Component):
    """See the module docstring: the collective of `plan` (a RingPlan) with DRAM beats of
    `words` words of `dram_bits` bits at `addr_bits`-bit word addresses."""

    def __init__(self, plan: RingPlan, words: int, dram_bits: int, addr_bits: int):
        n, p, S, H = plan.n, plan.p, plan.slice, plan.engines
        if plan.op not in OPS or plan.kind not in KINDS:
            raise ValueError(f"unknown ring collective {plan.kind!r} / operation {plan.op!r}")
        if plan.groups > 1 and (plan.kind == "permute" or plan.src_shift is not None or plan.dst_shift is not None):
            raise ValueError("a unit of several groups runs an all-reduce, reduce-scatter or all-gather")
        if plan.tour and (plan.groups != 2 or plan.kind == "permute" or plan.order or math.isqrt(p) ** 2 != p):
            raise ValueError("torus tours are the two groups of a collective over both axes of a k x k torus")
        if plan.tour and plan.spread:
            raise ValueError("torus tours keep every block whole in DRAM, not spread")
        if p < 2 or plan.dirs not in (1, 2) or n % (p * H):
            raise ValueError(f"a ring collective of {n} words needs p >= 2 and 1 or 2 directions dividing it")
        w = plan.lanes
        if w & (w - 1) or words % w or S % w:
            raise ValueError(f"{w} lanes must be a power of two dividing the DRAM beat {words} and the slice {S}")
        if plan.order and (plan.dirs > 1 or plan.reverse or sorted(plan.order) != list(range(p))):
            raise ValueError("a zigzag ring runs one way round, in an order of the coordinates 0 .. p - 1")
        if plan.chunk % S:
            raise ValueError(f"slice {S} does not divide chunk {plan.chunk}")
        if plan.spread:
            P = spread_piece(plan)
            if (
                plan.kind not in ("reduce_scatter", "all_gather")
                or len(plan.spread) != plan.groups
                or P * p * p * plan.groups != n
                or P & (P - 1)
                or P % words
            ):
                raise ValueError(
                    "a spread array is a two-axis reduce-scatter's operand or all-gather's result, one "
                    "stride pair per group, in pieces of a power of two words and whole DRAM beats"
                )
        if words & (words - 1) or plan.half % words:
            raise ValueError(f"DRAM beats of {words} words must be a power of two dividing {plan.half}")
        if (
            not plan.by_chunk(words)
            and (H > 1 or plan.kind != "all_reduce")
            or (plan.by_chunk(words) and plan.chunk % words)
        ):
            raise ValueError(f"chunks of {plan.chunk} words are not whole DRAM beats of {words} words")
        self.plan = plan
        self.stream = plan.streams(words)
        self.bits, self.signed = plan.dtype.bits, plan.dtype.signed
        self.words, self.dram_bits, self.addr_bits = words, dram_bits, addr_bits
        data_bits = words * dram_bits
        members = phase_members(plan, addr_bits, data_bits, words)
        for g in range(1, plan.groups):
            members[f"pe_x{g}"] = In(range(p))
        for h in range(H):
            members[f"tx{h}"] = Out(beat_stream(self.bits, plan.lanes))
            members[f"rx{h}"] = In(beat_stream(self.bits, plan.lanes))
        super().__init__(members)

    def alu(self, a, b):
        """`op` of two beats, lane by lane."""
        bits, lanes = self.bits, range(self.plan.lanes)
        return Cat(*(self._alu(a[j * bits : (j + 1) * bits], b[j * bits : (j + 1) * bits]) for j in lanes))

    def _alu(self, a, b):
        if self.plan.op == "add":
            return (a + b)[: self.bits]
        x, y = (a.as_signed(), b.as_signed()) if self.signed else (a, b)
        return Mux(x > y, a, b) if self.plan.op == "max" else Mux(x < y, a, b)

    def elaborate(self, platform):
        m = Module()
        state = Signal(range(len(STATES)))

        def goto(name):
            m.d.sync += state.eq(STATES.index(name))

        def now(name):
            return state == STATES.index(name)

        done = Signal()
        m.d.comb += self.done.eq(done)
        m.d.sync += done.eq(0)
        src, dst = Signal(self.addr_bits), Signal(self.addr_bits)
        ring, loading = Signal(), Signal()
        m.d.comb += [ring.eq(now("RING")), loading.eq(now("LOAD") | ring)]
        engines = [_Engine(self, h) for h in range(self.plan.engines)]
        for e in engines:
            e.elaborate(m, ring)
        mem = _LoadStore(self, m, engines)

        with m.If(now("IDLE")):
            with m.If(self.go):
                m.d.sync += [src.eq(self.src_base), dst.eq(self.dst_base)]
                for e in engines:
                    g = e.h // self.plan.dirs
                    m.d.sync += [e.x.eq(getattr(self, f"pe_x{g}" if g else "pe_x")), e.over.eq(0)]
                mem.reset_at_go(m)
                goto("BASES")
        with m.Elif(now("BASES")):
            for e in engines:
                e.bases(m)
            mem.reset_walks(m)
            goto("LOAD")
        with m.Elif(now("LOAD")):
            with m.If(mem.ring_may_start()):
                for e in engines:
                    e.start_ring(m)
                goto("RING")
        with m.Elif(ring):
            with m.If(_all(e.over | e.ends for e in engines)):
                goto("DRAIN")
        with m.Elif(now("DRAIN")):
            with m.If(_all(e.idle for e in engines)):
                goto("STORE")
        with m.Elif(now("STORE")):
            with m.If(mem.stored()):
                m.d.sync += done.eq(1)
                goto("IDLE")
        mem.elaborate(loading, src, dst)
        return m


def _all(values):
    out = Const(1, 1)
    for v in values:
        out = out & v
    return out


def _items(plan: RingPlan, stream: bool, load: bool) -> int:
    """Items of the operand (load) or of the result per engine: slices when streaming, else
    chunks (one whole half when the chunks are not whole beats)."""
    per_round = plan.load_items() if load else (plan.p if plan.stores_all else 1)
    return plan.rounds * per_round if stream else per_round


class _Engine:
    """One direction of the ring: its operand and result memories (rows of W words), its send
    and forward parts, the ALU stage and the FIFO to its link (see RingCollective). `loaded`
    (operand items of this engine in its memory) and `finished` (result items final) connect it to _LoadStore;
    `sign` is the direction of its chunk arithmetic (-1: engine 0, +1: engine 1)."""

    def __init__(self, unit: RingCollective, h: int):
        plan = unit.plan
        p, C, ne = plan.p, plan.chunk, plan.half
        self.unit, self.h, self.sign = unit, h, -plan.ways[h]
        self.rows = ne // unit.words
        self.tx, self.rx = getattr(unit, f"tx{h}"), getattr(unit, f"rx{h}")
        # two memories of rows of W words, each written by one port so that it maps to block
        # RAM (a read port more is a copy): the operand (the load writes it; the send, the
        # forward part and an all-gather's store of its own slices read it) and the result
        # (the ALU writes it; the store reads it)
        self.operand = Memory(shape=unsigned(unit.words * unit.bits), depth=self.rows, init=[])
        self.result = Memory(shape=unsigned(unit.words * unit.bits), depth=self.rows, init=[])
        loads, stores = _items(plan, unit.stream, True), _items(plan, unit.stream, False)
        self.stores = stores

        def sig(shape, name):
            return Signal(shape, name=f"{name}{h}")

        self.x = sig(range(p), "x")  # the PE's coordinate
        self.send_base = sig(range(ne), "send_base")  # the send's chunk * C
        self.fwd_base = sig(range(ne), "fwd_base")  # step 0's chunk * C
        self.loaded, self.finished = sig(range(loads + 1), "loaded"), sig(range(stores + 1), "finished")
        self.over, self.ends, self.idle = sig(1, "over"), sig(1, "ends"), sig(1, "idle")
        self.snd_on, self.snd_ready = sig(1, "snd_on"), sig(1, "snd_ready")
        # ks and k count the beats (of `lanes` words) of a slice
        Sb = plan.beats
        self.ks, self.snd_off = sig(range(max(2, Sb)), "ks"), sig(range(max(2, C)), "snd_off")
        self.snd_need = sig(range(loads + p + 1), "snd_need")  # the item the send reads
        self.fwd_on, self.k = sig(1, "fwd_on"), sig(range(max(2, Sb)), "k")
        self.step, self.rnd = sig(range(max(2, plan.steps)), "step"), sig(range(max(2, plan.rounds)), "rnd")
        self.rnd_items = sig(range(loads + p + 1), "rnd_items")  # the round's first item
        self.fwd_need = sig(range(loads + p + 1), "fwd_need")  # the item the popped step reads
        self.off, self.cbase = sig(range(max(2, C)), "off"), sig(range(ne), "cbase")
        self.s1s, self.s1 = sig(1, "s1s"), sig(1, "s1")  # a send word / a popped word in stage 1

    def chunk_base(self, k: int):
        """chunk(k) * C = ((x + sign * k) mod p) * C, from the coordinate register."""
        p, C = self.unit.plan.p, self.unit.plan.chunk
        k %= p
        if k == 0:
            return self.x * C
        if self.sign < 0:
            out = (self.x - k) * C
            for j in range(k):  # x == j: wrap round
                out = Mux(self.x == j, (p - k + j) * C, out)
            return out
        out = (self.x + k) * C
        for j in range(p - k, p):
            out = Mux(self.x == j, (j + k - p) * C, out)
        return out

    def next_chunk(self, cbase):
        """The base of chunk(k + 1) from chunk(k)'s."""
        p, C = self.unit.plan.p, self.unit.plan.chunk
        if self.sign < 0:
            return Mux(cbase == 0, (p - 1) * C, cbase - C)
        return Mux(cbase == (p - 1) * C, 0, cbase + C)

    def bases(self, m) -> None:
        gather = not self.unit.plan.loads_all  # from the own chunk
        m.d.sync += [
            self.send_base.eq(self.chunk_base(0 if gather else 1)),
            self.fwd_base.eq(self.chunk_base(1 if gather else 2)),
        ]

    def start_ring(self, m) -> None:
        m.d.sync += [
            self.snd_on.eq(1),
            self.ks.eq(0),
            self.snd_off.eq(0),
            self.snd_ready.eq(0),
            self.snd_need.eq(0),
            self.fwd_on.eq(0),
            self.rnd.eq(0),
            self.rnd_items.eq(0),
            self.off.eq(0),
        ]

    def step_roles(self, step):
        """(combine with the local word, write the result, push to the link, final) for a
        word popped at `step` (see RingCollective)."""
        plan = self.unit.plan
        p, last = plan.p, plan.steps - 1
        # comparisons with 0 folded: the step counter is unsigned (and lint-clean Verilog)
        before_last = step < last if last > 0 else Const(0, 1)
        if plan.kind == "all_reduce":
            gathered = step >= p - 2 if p > 2 else Const(1, 1)
            return step <= p - 2, gathered, before_last, gathered
        if plan.kind == "reduce_scatter":
            return Const(1, 1), step == last, before_last, step == last
        if plan.kind == "permute":
            return Const(0, 1), step == last, before_last, step == last
        return Const(0, 1), Const(1, 1), before_last, Const(1, 1)

    def elaborate(self, m, ring) -> None:
        unit, plan, h, bits = self.unit, self.unit.plan, self.h, self.unit.bits
        lw = (unit.words - 1).bit_length()
        m.submodules[f"operand{h}"], m.submodules[f"result{h}"] = self.operand, self.result
        self.lp = self.operand.write_port()  # DRAM responses: whole rows
        self.rs = self.operand.read_port()  # the send's
        combines = plan.kind in ("all_reduce", "reduce_scatter")
        self.rf = self.operand.read_port() if combines else None  # the forward part's
        self.sp_own = self.operand.read_port() if plan.kind == "all_gather" else None  # the store's
        self.wp = self.result.write_port(granularity=bits)
        self.sp = self.result.read_port()  # the store's
        m.submodules[f"out{h}"] = self.out = SyncFIFO(width=bits * plan.lanes, depth=OUT_FIFO)
        # a word address: its row, and its beat of `lanes` words in the row (addresses are
        # multiples of lanes)
        lg = (plan.lanes - 1).bit_length()
        self.row_of = (lambda a: a[lw:]) if lw else (lambda a: a)
        self.sel_of = (lambda a: a[lg:lw]) if lw > lg else (lambda a: Const(0, 1))
        issue_s, issue_f, step_end, start = self._control(m, ring)
        self._datapath(m, issue_s, issue_f)
        # a result item is final two cycles after its last word is written
        gather = plan.kind == "all_gather" and unit.stream
        roles = self.step_roles(self.step)
        final = (step_end & roles[3]) if unit.stream else self.ends
        own = start if gather else Const(0, 1)  # an all-gather's own slice, as its round starts
        f1, f2, o1, o2 = (Signal(name=f"{s}{h}") for s in ("final1_", "final2_", "own1_", "own2_"))
        m.d.sync += [f1.eq(final), f2.eq(f1), o1.eq(own), o2.eq(o1)]
        if unit.stream:
            m.d.sync += self.finished.eq(self.finished + f2 + o2)
        else:
            with m.If(f2):
                m.d.sync += self.finished.eq(self.stores)

    def _control(self, m, ring):
        """The send and forward parts; the send part of round j + 1 runs while the forward
        part pops round j's last step (which never sends)."""
        unit, plan, h = self.unit, self.unit.plan, self.h
        S, Sb, last = plan.slice, plan.beats, plan.steps - 1
        stream = unit.stream
        room = Signal(name=f"room{h}")
        m.d.comb += room.eq(self.out.level + self.s1 + self.s1s < OUT_FIFO)
        comb = self.step_roles(self.step)[0]
        issue_s, issue_f = Signal(name=f"issue_s{h}"), Signal(name=f"issue_f{h}")
        snd_ok = (self.snd_need < self.loaded) if stream else Const(1, 1)
        fwd_ok = (~comb | (self.fwd_need < self.loaded)) if stream else Const(1, 1)
        m.d.comb += [
            issue_s.eq(ring & self.snd_on & room & snd_ok),
            issue_f.eq(ring & self.fwd_on & room & self.rx.valid & fwd_ok),
            self.rx.ready.eq(issue_f),
        ]
        names = ("send_last", "round_last", "step_end", "start")
        send_last, round_last, step_end, start = (Signal(name=f"{s}{h}") for s in names)
        m.d.comb += [
            send_last.eq(issue_s & (self.ks == Sb - 1)),
            step_end.eq(issue_f & (self.k == Sb - 1)),
            round_last.eq(step_end & (self.step == last)),
            self.ends.eq(round_last & (self.rnd == plan.rounds - 1)),
            start.eq((send_last | self.snd_ready) & (~self.fwd_on | round_last)),
        ]
        with m.If(issue_s):
            m.d.sync += self.ks.eq(Mux(self.ks == Sb - 1, 0, self.ks + 1))
            with m.If(self.ks == Sb - 1):
                m.d.sync += [self.snd_on.eq(0), self.snd_need.eq(self.snd_need + plan.load_items())]
        with m.If(issue_f):
            m.d.sync += self.k.eq(self.k + 1)
            with m.If(self.k == Sb - 1):
                m.d.sync += [
                    self.k.eq(0),
                    self.step.eq(self.step + 1),
                    self.fwd_need.eq(self.fwd_need + 1),
                    self.cbase.eq(self.next_chunk(self.cbase)),
                ]
        # the round's counters move on with its last pop, whether the next round's send is
        # done then or later (its operand may still be loading)
        rnd, off = Signal.like(self.rnd, name=f"rnd_next{h}"), Signal.like(self.off, name=f"off_next{h}")
        items = Signal.like(self.rnd_items, name=f"rnd_items_next{h}")
        m.d.comb += [rnd.eq(self.rnd), off.eq(self.off), items.eq(self.rnd_items)]
        with m.If(round_last):
            m.d.comb += [rnd.eq(self.rnd + 1), off.eq(self.off + S), items.eq(self.rnd_items + plan.load_items())]
            m.d.sync += [self.rnd.eq(rnd), self.off.eq(off), self.rnd_items.eq(items)]
        with m.If(start):
            m.d.sync += [
                self.fwd_on.eq(1),
                self.step.eq(0),
                self.k.eq(0),
                self.cbase.eq(self.fwd_base),
                self.snd_ready.eq(0),
                self.fwd_need.eq(items + 1),
            ]
        with m.Elif(send_last):
            m.d.sync += self.snd_ready.eq(1)
        with m.If(round_last & ~start):
            m.d.sync += self.fwd_on.eq(0)
        with m.If(self.ends):
            m.d.sync += self.over.eq(1)
        # the next round's send starts as the forward part enters its round's last step
        if last == 0:
            enter_last, nxt = start, off
        else:
            enter_last, nxt = step_end & (self.step == last - 1), self.off
        with m.If(enter_last & (rnd != plan.rounds - 1)):
            m.d.sync += [self.snd_on.eq(1), self.snd_off.eq(nxt + S)]
        return issue_s, issue_f, step_end, start

    def _datapath(self, m, issue_s, issue_f) -> None:
        """Stage 0 reads the operand (a send word on the send's port, a popped word on the
        forward's); stage 1 is the ALU, the push to the link and the write back."""
        unit, h, W, bits, w = self.unit, self.h, self.unit.words, self.unit.bits, self.unit.plan.lanes
        addr_s, addr_f = Signal.like(self.send_base, name=f"addr_s{h}"), Signal.like(self.cbase, name=f"addr_f{h}")
        m.d.comb += [
            addr_s.eq(self.send_base + self.snd_off + self.ks * w),
            addr_f.eq(self.cbase + self.off + self.k * w),
        ]
        m.d.comb += self.rs.addr.eq(self.row_of(addr_s))
        if self.rf is not None:
            m.d.comb += self.rf.addr.eq(self.row_of(addr_f))
        comb, write, push, _ = self.step_roles(self.step)
        s1_comb, s1_write, s1_push = Signal(name=f"s1_comb{h}"), Signal(name=f"s1_write{h}"), Signal(name=f"s1_push{h}")
        s1s_sel, s1_sel = Signal(max(1, len(self.sel_of(addr_s))), name=f"s1s_sel{h}"), Signal.like(self.sel_of(addr_f))
        s1_row, s1_recv = Signal.like(self.row_of(addr_f), name=f"s1_row{h}"), Signal(bits * w, name=f"s1_recv{h}")
        m.d.sync += [
            self.s1s.eq(issue_s),
            s1s_sel.eq(self.sel_of(addr_s)),
            self.s1.eq(issue_f),
            s1_row.eq(self.row_of(addr_f)),
            s1_sel.eq(self.sel_of(addr_f)),
            s1_recv.eq(self.rx.payload.as_value()),
        ]
        with m.If(issue_f):
            m.d.sync += [s1_comb.eq(comb), s1_write.eq(write), s1_push.eq(push)]

        def word(port, sel):
            return port.data.word_select(sel, bits * w) if W > w else port.data

        val = Signal(bits * w, name=f"val{h}")
        out = self.out
        m.d.comb += [
            val.eq(Mux(s1_comb, unit.alu(s1_recv, word(self.rf, s1_sel)), s1_recv) if self.rf is not None else s1_recv),
            out.w_en.eq(self.s1s | (self.s1 & s1_push)),
            out.w_data.eq(Mux(self.s1s, word(self.rs, s1s_sel), val)),
            self.tx.valid.eq(out.r_rdy),
            self.tx.payload.eq(out.r_data),
            out.r_en.eq(self.tx.ready),
            self.idle.eq(~self.s1 & ~self.s1s & ~out.r_rdy),
        ]
        # the write to the result memory is registered (stage 2): the store reads a final
        # slice three cycles after its last pop at the earliest, so it still sees the write
        w2_row, w2_val = Signal.like(s1_row, name=f"w2_row{h}"), Signal(bits * w, name=f"w2_val{h}")
        w2_en = Signal(W, name=f"w2_en{h}")
        lanes = Const((1 << w) - 1, W)  # the beat's words of the row
        m.d.sync += [
            w2_row.eq(s1_row),
            w2_val.eq(val),
            w2_en.eq(Mux(self.s1 & s1_write, (lanes << (s1_sel * w))[:W], 0)),
        ]
        m.d.comb += [self.wp.addr.eq(w2_row), self.wp.data.eq(Cat(*([w2_val] * (W // w)))), self.wp.en.eq(w2_en)]


class _LoadStore:
    """The unit's DRAM side: the load of the operand into the engines' operand memories, item
    by item in turn, and the store of the result's final items from their result memories (see
    RingCollective)."""

    def __init__(self, unit: RingCollective, m, engines: list):
        plan, W = unit.plan, unit.words
        self.unit, self.m, self.engines = unit, m, engines
        self.loads = plan.n // W // (1 if plan.loads_all else plan.p)  # beats of the operand
        self.saves = plan.n // W // (1 if plan.stores_all else plan.p)  # beats of the result
        self.req, self.resp = Signal(range(self.loads + 1), name="req"), Signal(range(self.loads + 1), name="resp")
        self.st_rd, self.st_sent = (
            Signal(range(self.saves + 1), name="st_rd"),
            Signal(range(self.saves + 1), name="st_sent"),
        )
        self.reqs = _Turns(unit, engines, "req", load=True)
        self.resps = _Turns(unit, engines, "resp", load=True)
        self.st_rows = _Turns(unit, engines, "st", load=False)
        self.st_items = [Signal(range(e.stores + 1), name=f"st_items{e.h}") for e in engines]  # items stored
        self.first = plan.first_beats(W)

    def reset_at_go(self, m) -> None:
        m.d.sync += [self.req.eq(0), self.resp.eq(0), self.st_rd.eq(0), self.st_sent.eq(0)]
        m.d.sync += [n.eq(0) for n in self.st_items]
        for e in self.engines:
            m.d.sync += [e.loaded.eq(0), e.finished.eq(0)]

    def reset_walks(self, m) -> None:
        for turns in (self.reqs, self.resps, self.st_rows):
            turns.reset(m)

    def ring_may_start(self):
        return self.unit.rd_resp.valid & (self.resp == self.first - 1)

    def stored(self):
        return self.st_sent == self.saves

    def elaborate(self, loading, src, dst) -> None:
        m, unit, engines = self.m, self.unit, self.engines
        W, bits = unit.words, unit.bits
        # the load: one request per cycle from LOAD on, each response written to its row
        m.d.comb += [
            unit.rd_req.valid.eq(loading & (self.req != self.loads)),
            unit.rd_req.addr.eq(src + self.reqs.dram_addr()),
        ]
        with m.If(unit.rd_req.valid & unit.rd_req.ready):
            m.d.sync += self.req.eq(self.req + 1)
            self.reqs.step(m)
        row = Cat(*(unit.rd_resp.data[j * unit.dram_bits : j * unit.dram_bits + bits] for j in range(W)))
        for h, e in enumerate(engines):
            mine = unit.rd_resp.valid & self.resps.turn_is(h)
            m.d.comb += [e.lp.addr.eq(self.resps.walks[h].row()), e.lp.data.eq(row), e.lp.en.eq(mine)]
            with m.If(mine & self.resps.walks[h].item_end()):
                m.d.sync += e.loaded.eq(e.loaded + 1)
        with m.If(unit.rd_resp.valid):
            m.d.sync += self.resp.eq(self.resp + 1)
            self.resps.step(m)
        m.d.comb += unit.rd_resp.ready.eq(1)

        # the store: result rows (a read port of each result memory) -> the write queue -> the
        # arbiter, an item's rows once the item is final; each row's DRAM address goes into the
        # queue with it (the arbiter's handshake only takes the queue's head)
        data_bits = W * unit.dram_bits
        m.submodules.wq = wq = SyncFIFO(width=data_bits + unit.addr_bits, depth=4)
        st1, st1_turn = Signal(), Signal(range(max(2, len(engines))))
        st1_addr = Signal(unit.addr_bits)
        st_items = self.st_items
        may = Const(0, 1)
        for h, e in enumerate(engines):
            may = may | (self.st_rows.turn_is(h) & (st_items[h] < e.finished))
            m.d.comb += e.sp.addr.eq(self.st_rows.walks[h].row())
            if e.sp_own is not None:
                m.d.comb += e.sp_own.addr.eq(self.st_rows.walks[h].row())
        st1_own = Signal()  # an all-gather's own slice: from the operand
        with m.If((self.st_rd != self.saves) & (wq.level + st1 < 3) & may):
            m.d.sync += [self.st_rd.eq(self.st_rd + 1), st1.eq(1), st1_turn.eq(self.st_rows.turn)]
            m.d.sync += [st1_own.eq(self.st_rows.own()), st1_addr.eq(dst + self.st_rows.dram_addr())]
            for h in range(len(engines)):
                with m.If(self.st_rows.turn_is(h) & self.st_rows.walks[h].item_end()):
                    m.d.sync += st_items[h].eq(st_items[h] + 1)
            self.st_rows.step(m)
        with m.Else():
            m.d.sync += st1.eq(0)
        with m.If(unit.wr_sent):
            m.d.sync += self.st_sent.eq(self.st_sent + 1)
        rows = [e.sp.data if e.sp_own is None else Mux(st1_own, e.sp_own.data, e.sp.data) for e in engines]
        data = rows[0]
        for h in range(1, len(engines)):
            data = Mux(st1_turn == h, rows[h], data)
        plan = unit.plan
        mask = Const((1 << W) - 1, W)
        if masked(plan):  # PEs with no source: unit.receives low
            if plan.quiet:  # leave the result as it is
                mask = Mux(unit.receives, mask, 0)
            else:  # zeros
                data = Mux(unit.receives, data, 0)
        m.d.comb += [
            wq.w_en.eq(st1),
            wq.w_data.eq(Cat(*(_widen(data[j * bits : (j + 1) * bits], unit.dram_bits) for j in range(W)), st1_addr)),
            unit.wr.valid.eq(wq.r_rdy),
            unit.wr.data.eq(wq.r_data[:data_bits]),
            unit.wr.addr.eq(wq.r_data[data_bits:]),
            unit.wr.mask.eq(mask),
            wq.r_en.eq(unit.wr.ready),
        ]


class _Turns:
    """The beats of every engine's items in one order: an item of engine 0, one of engine 1,
    ..., then the next item of each. Per engine a _Walk; `turn` is the engine whose item is
    next. Load walks take an engine's chunks in the order it reads them (chunk(1), chunk(2),
    ...; an all-gather's chunk(0) only), store walks in the order they become final
    (chunk(0), chunk(1), ...; a reduce-scatter's chunk(0) only)."""

    def __init__(self, unit: RingCollective, engines: list, name: str, load: bool):
        plan = unit.plan
        self.unit, self.engines, self.load = unit, engines, load
        self.every = plan.loads_all if load else plan.stores_all  # the DRAM array has every block
        self.walks = [_Walk(unit, e, f"{name}{e.h}", plan.p if self.every else 1, self.every) for e in engines]
        self.turn = Signal(range(max(2, len(engines))), name=f"{name}_turn")

    def turn_is(self, h: int):
        return self.turn == h if len(self.engines) > 1 else Const(1, 1)

    def own(self):
        """Whether the next beat is of an all-gather's own chunk (the first of each round)."""
        if self.unit.plan.kind != "all_gather":
            return Const(0, 1)
        out = Const(0, 1)
        for h, walk in enumerate(self.walks):
            out = out | (self.turn_is(h) & (walk.s == 0))
        return out

    def reset(self, m) -> None:
        plan = self.unit.plan
        if self.load:
            first = 1 if plan.loads_all else 0  # the operand: its chunks from chunk(1), else the own
        else:
            first = plan.hops if plan.kind == "permute" else 0  # a permute keeps the one it receives
        m.d.sync += self.turn.eq(0)
        for e, walk in zip(self.engines, self.walks):
            walk.reset(m, e.chunk_base(first) if walk.by_chunk else 0)

    def step(self, m) -> None:
        H = len(self.engines)
        for h, walk in enumerate(self.walks):
            with m.If(self.turn_is(h)):
                walk.step(m)
                if H > 1:
                    with m.If(walk.item_end()):
                        m.d.sync += self.turn.eq((h + 1) % H)

    def dram_addr(self):
        """The next beat's word address in the DRAM array (relative to its base): in group g's
        part (at g * dirs * C * p when the array has every block, else at g * dirs * C),
        chunk c's half of engine h (the group's engine j) at b * dirs * C + j * C when the
        array has every block, b = c (on a zigzag ring b = order[c]: chunk c is the block of
        the PE at ring position c), else at j * C; in a reduce-scatter's or all-gather's array
        of every block on torus tours, at tour_block(g, c) * F + h * C (every block holds a
        part of each engine, F = p blocks' words / p); in a spread array of every block, word
        j * C + inner of the group's chunk c as spread_addr says (pieces of a power of two
        words: a shift and a mask)."""
        plan = self.unit.plan
        out = None
        for h, walk in enumerate(self.walks):
            g, j = divmod(h, plan.dirs)
            if walk.spread:
                P = spread_piece(plan)
                lg = P.bit_length() - 1
                o = walk.inner + j * plan.chunk
                a = walk.dbase + (o >> lg) * (walk.spread[1] * P * plan.groups) + (g * P) + o[:lg]
            elif plan.tour and self.every and plan.kind != "all_reduce":  # dbase: the block's
                a = walk.inner + (h * plan.chunk) + walk.dbase
            else:
                part = plan.dirs * plan.chunk * (plan.p if self.every else 1)
                a = walk.inner + (g * part + j * plan.chunk)
                if self.every:
                    a = a + (walk.dbase * plan.dirs if plan.dirs > 1 else walk.dbase)
            out = a if out is None else Mux(self.turn == h, a, out)
        return out


class _Walk:
    """One engine's beats in item order: the beats of an item (a slice of S words of a chunk;
    when not streaming, a whole chunk, or the whole half when chunks are not whole beats), the
    `per_round` items of a round chunk after chunk from the first (engine.next_chunk), then
    the next round."""

    def __init__(self, unit: RingCollective, engine: _Engine, name: str, per_round: int, spread: bool):
        plan, W = unit.plan, unit.words
        self.engine, self.W, self.S = engine, W, plan.slice
        self.by_chunk = plan.by_chunk(W)
        if unit.stream:
            self.item_beats = plan.slice // W
        else:
            self.item_beats = plan.chunk // W if self.by_chunk else plan.half // W
            self.S = plan.chunk  # one "round" of whole chunks
        self.per_round = per_round if self.by_chunk else 1
        ne = plan.half
        self.b = Signal(range(max(2, self.item_beats)), name=f"{name}_b")
        self.s = Signal(range(max(2, self.per_round)), name=f"{name}_s")
        self.first = Signal(range(ne + 1), name=f"{name}_first")  # the first chunk's base
        self.cbase = Signal(range(ne + 1), name=f"{name}_cbase")  # chunk * C
        self.inner = Signal(range(ne + W), name=f"{name}_inner")  # round * S + b * W
        self.rbase = Signal(range(ne + 1), name=f"{name}_rbase")  # round * S
        # the chunk's block in DRAM, registered with cbase: block order[chunk] on a zigzag
        # ring; in a spread array, its first piece's final block times F (spread_addr)
        self.C = plan.chunk
        self.spread = plan.spread[engine.h // plan.dirs] if plan.spread and spread else None
        if self.spread:
            F = spread_piece(plan) * plan.groups
            self.bases = [(plan.order[c] if plan.order else c) * self.spread[0] * F for c in range(plan.p)]
            self.dbase = Signal(range(plan.n + 1), name=f"{name}_dbase")
        elif plan.tour and spread and plan.kind != "all_reduce":
            # chunk c is the group's part of the block of the PE at tour position c
            g, F = engine.h // plan.dirs, plan.n // plan.p
            self.bases = [tour_block(plan, g, c) * F for c in range(plan.p)]
            self.dbase = Signal(range(plan.n + 1), name=f"{name}_dbase")
        elif plan.order:
            self.bases = [b * self.C for b in plan.order]
            self.dbase = Signal(range(ne + 1), name=f"{name}_dbase")
        else:
            self.bases, self.dbase = None, self.cbase

    def _chunk(self, m, cbase) -> None:
        m.d.sync += self.cbase.eq(cbase)
        if self.bases:
            block = Const(0, 1)
            for c, b in enumerate(self.bases):
                block = Mux(cbase == c * self.C, b, block)
            m.d.sync += self.dbase.eq(block)

    def reset(self, m, first) -> None:
        m.d.sync += [
            self.b.eq(0),
            self.s.eq(0),
            self.first.eq(first),
            self.rbase.eq(0),
            self.inner.eq(0),
        ]
        self._chunk(m, first)

    def row(self):
        """The memory row of the next beat: (chunk * C + inner) / W."""
        addr = self.cbase + self.inner
        return addr[(self.W - 1).bit_length() :] if self.W > 1 else addr

    def item_end(self):
        return self.b == self.item_beats - 1

    def step(self, m) -> None:
        with m.If(~self.item_end()):
            m.d.sync += [self.b.eq(self.b + 1), self.inner.eq(self.inner + self.W)]
        with m.Elif(self.s != self.per_round - 1):
            m.d.sync += [
                self.b.eq(0),
                self.s.eq(self.s + 1),
                self.inner.eq(self.rbase),
            ]
            self._chunk(m, self.engine.next_chunk(self.cbase))
        with m.Else():
            m.d.sync += [
                self.b.eq(0),
                self.s.eq(0),
                self.rbase.eq(self.rbase + self.S),
                self.inner.eq(self.rbase + self.S),
            ]
            self._chunk(m, self.first)


def _widen(v, width: int):
    """`v` zero-extended to `width` bits (a DRAM word: upper bits zero)."""
    return v if len(v) >= width else Cat(v, Const(0, width - len(v)))
