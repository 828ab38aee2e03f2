"""Collective units of a mesh PE: `RingAllReduce`, an all-reduce over a ring, one way or both.

The unit is a client of the PE's DRAM arbiter (one read client, one write client, like a
LoadUnit and a StoreUnit) and drives one ring link pair per direction (LinkTx / LinkRx,
hw/link.py). Every PE runs the same unit; its ring coordinate `pe_x` is an input port,
sampled at `go`.

Data: a local vector of `n` words at `src_base` in DRAM; the reduced vector goes to
`dst_base`. With `dirs` = 2 (a bidirectional ring) the first half of the vector goes round
one way (engine 0: to the next PE, x + 1, from the previous one) and the second half the
other way (engine 1: to the previous PE, from the next one; it runs the same algorithm in the
mirrored coordinate (p - x) mod p), so each half uses its own links. Per engine: its half of
n / dirs words is p chunks of C words; a slice is S words of a chunk; round j works on the
slices j*S .. j*S + S - 1 of every chunk.

    LOAD    the engines' halves stream in item by item, an item being one slice of one chunk
            in the order its engine reads them (round by round; in a round, chunks x - 1,
            x - 2, ..., x of the engine's coordinate x); items of the engines alternate, one
            item of each in turn. One read request per cycle, each response written to its
            row of the engine's buffer (rows of the W words of a DRAM beat). The ring starts
            once every engine's first two items are in; the rest arrive at W / dirs words a
            cycle per engine, ahead of the ring (it reads at most one word a cycle). When a
            slice is not a whole number of beats the vector is read whole first, in order.
    RING    R = C / S rounds. Per engine two parts:
      send  step 0: push the S words of chunk (x - 1) mod p to the link, one per cycle;
            round j + 1's runs during round j's last step (which neither reads nor sends)
      fwd   once its round's step 0 is sent, pop the 2(p-1)S words the upstream PE sends,
            in order; the word k of step s belongs to chunk (x - s - 2) mod p:
              s <  p - 2        reduce-scatter: send (received op local) on as step s + 1
              s == p - 2        last reduce-scatter step: the chunk is reduced; keep it and
                                send it on (all-gather step p - 1)
              p - 2 < s < 2p-3  all-gather: keep the received word and send it on
              s == 2p - 3       all-gather, last step: keep it
            A word that needs the local value waits until its item is loaded (never, with
            fixed DRAM latency).
    DRAIN   wait until every word sent has left for the link
    STORE   wait until the result is written to dst_base: a store engine (a read port of
            each buffer) writes each final slice (steps p - 2 .. 2p - 3 of a round), one beat
            per cycle, from two cycles after its last word is written, the engines' slices in
            turn; when the vector was read whole, all of it once the ring is done

A popped (or, by the send part, a read) word reads the buffer in cycle t; in t + 1 the ALU
(`op`: wrapping add, signed/unsigned max or min, one LUT level of logic, no register)
combines it and pushes the result into a 4-deep link FIFO and writes the buffer. Words are
popped or read only while that FIFO, counting the word in flight, has room, so the link's
backpressure never loses a word.

Timing (model.ring_allreduce_cycles restates it; simulation checks it to the cycle). DRAM
latency Lm, link latency L, W words per DRAM beat, F = L + RING_HOP (4) the hop from a PE's
pop of a word to its neighbour's pop of the word it sends on: popped in t, pushed in t + 1,
into LinkTx in t + 2, on the wire from t + 3, in the receiver's output register L cycles
later, popped in t + 4 + L. Every PE runs the same timeline (SPMD, same DRAM latency) and
both engines run in step, so:

    go -> first send     first + Lm + RING_LOAD (4), first = 2 * dirs * S / W beats (two
                         items per engine) when streaming, else n / W: BASES, then one
                         request per cycle, each answered Lm + 2 cycles later through the
                         arbiter's registers
    one round            (2p - 2) * max(S, F), from its first send to the next round's
    the last round       + S: its last step's S words
    last pop -> done     last + RING_STORE (6), last = dirs * S / W beats (every engine's
                         last slice) when streaming, else n / W: one row read and one DRAM
                         write per cycle; done once the channel has taken the last

The receive FIFO holds D >= S + L + 2 words, so credits never stall the sender (the step-0
words wait in the FIFO until its owner pops them; their credits take L cycles back), and a
slice S <= D cannot deadlock (every PE's step 0 fits in its neighbour's FIFO).

Members: go, done, pe_x: In, src_base, dst_base: In(addr), rd_req, rd_resp, wr, wr_sent
(the arbiter client ports), and per engine h: tx<h>: Out(beat_stream) (to its LinkTx.i),
rx<h>: In(beat_stream) (from its LinkRx.o).
"""

from __future__ import annotations

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
    """A PE's ring all-reduce: `n` words of `dtype` over `p` PEs with operation `op`, from
    the DRAM array `src` (the body's result) to the DRAM array `dst` (the kernel's result),
    in slices of `slice` words, over `dirs` directions (1: one way; 2: half the vector each
    way) of links of `latency` cycles with receive FIFOs of `depth` beats."""

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

    @property
    def half(self) -> int:
        """Words per direction."""
        return self.n // self.dirs

    @property
    def chunk(self) -> int:
        return self.half // self.p

    @property
    def rounds(self) -> int:
        return self.chunk // self.slice

    def streams(self, words: int) -> bool:
        """Whether the operand streams in slice by slice (see RingAllReduce): slices of
        whole DRAM beats."""
        return self.slice % words == 0

    def first_beats(self, words: int) -> int:
        """DRAM beats read before the ring starts: two slices per engine when streaming, else all."""
        return 2 * self.dirs * self.slice // words if self.streams(words) else self.n // words

    def last_beats(self, words: int) -> int:
        """DRAM beats written after the last pop: every engine's last slice when streaming, else all."""
        return self.dirs * self.slice // words if self.streams(words) else self.n // words


def ring_links(plan: RingPlan) -> list:
    """(sending, receiving) PE port names of each engine's links: engine 0 sends to the next
    PE (x + 1) and receives from the previous one; engine 1 the other way round."""
    return [("next_tx", "prev_rx"), ("prev_tx", "next_rx")][: plan.dirs]


OUT_FIFO = 4  # words between the ALU and the link sender
STATES = ("IDLE", "BASES", "LOAD", "RING", "DRAIN", "STORE")


class RingAllReduce(wiring.Component):
    """See the module docstring: the all-reduce of `plan` (a RingPlan) with DRAM beats of
    `words` words of `dram_bits` bits at `addr_bits`-bit word addresses."""

    def __init__(self, plan: RingPlan, words: int, dram_bits: int, addr_bits: int):
        n, p, S, H = plan.n, plan.p, plan.slice, plan.dirs
        if plan.op not in OPS:
            raise ValueError(f"unknown ring operation {plan.op!r}")
        if p < 2 or H not in (1, 2) or n % (p * H):
            raise ValueError(f"a ring all-reduce of {n} words needs p >= 2 and 1 or 2 directions dividing it")
        if plan.chunk % S:
            raise ValueError(f"slice {S} does not divide chunk {plan.chunk}")
        if words & (words - 1) or plan.half % words:
            raise ValueError(f"DRAM beats of {words} words must be a power of two dividing {plan.half}")
        self.plan = plan
        self.stream = plan.streams(words)
        self.bits, self.signed = plan.dtype.bits, plan.dtype.signed
        self.words, self.dram_bits, self.addr_bits = words, dram_bits, addr_bits
        data_bits = words * dram_bits
        members = {
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
        for h in range(H):
            members[f"tx{h}"] = Out(beat_stream(self.bits, 1))
            members[f"rx{h}"] = In(beat_stream(self.bits, 1))
        super().__init__(members)

    def alu(self, a, b):
        if self.plan.op == "add":
            return (a + b)[: self.bits]
        x, y = (a.as_signed(), b.as_signed()) if self.signed else (a, b)
        return Mux(x > y, a, b) if self.plan.op == "max" else Mux(x < y, a, b)

    def elaborate(self, platform):
        m = Module()
        plan, W = self.plan, self.words
        H = plan.dirs
        rows = plan.half // W  # buffer rows per engine
        items = plan.rounds * plan.p if self.stream else 1  # items per engine
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
        engines = [_Engine(self, h, rows, items) for h in range(H)]
        for e in engines:
            e.elaborate(m, ring)
        load = _LoadStore(self, m, engines, rows, items)

        with m.If(now("IDLE")):
            with m.If(self.go):
                m.d.sync += [src.eq(self.src_base), dst.eq(self.dst_base)]
                for e in engines:
                    e.start_at_go(m, self.pe_x)
                load.reset_at_go(m)
                goto("BASES")
        with m.Elif(now("BASES")):
            for e in engines:
                e.bases(m)
            load.reset_walks(m)
            goto("LOAD")
        with m.Elif(now("LOAD")):
            with m.If(load.ring_may_start()):
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
            with m.If(load.stored()):
                m.d.sync += done.eq(1)
                goto("IDLE")
        load.elaborate(loading, src, dst)
        return m


def _all(values):
    out = Const(1, 1)
    for v in values:
        out = out & v
    return out


class _Engine:
    """One direction of the ring: its buffer (rows of W words), its send and forward parts,
    the ALU stage and the FIFO to its link (see RingAllReduce). `loaded` (items of this
    engine in the buffer) and `finished` (final items written) connect it to _LoadStore."""

    def __init__(self, unit: RingAllReduce, h: int, rows: int, items: int):
        plan = unit.plan
        p, C, S = plan.p, plan.chunk, plan.slice
        self.unit, self.h, self.rows = unit, h, rows
        self.tx, self.rx = getattr(unit, f"tx{h}"), getattr(unit, f"rx{h}")
        ne = plan.half
        self.buf = Memory(shape=unsigned(unit.words * unit.bits), depth=rows, init=[])
        self.x = Signal(range(p), name=f"x{h}")  # the engine's coordinate
        self.send_base = Signal(range(ne), name=f"send_base{h}")  # ((x - 1) mod p) * C
        self.fwd_base = Signal(range(ne), name=f"fwd_base{h}")  # ((x - 2) mod p) * C
        self.loaded = Signal(range(items + 1), name=f"loaded{h}")
        self.finished = Signal(range(items + 1), name=f"finished{h}")
        self.over = Signal(name=f"over{h}")  # the last round is done
        self.ends = Signal(name=f"ends{h}")  # the last round ends in this cycle
        self.idle = Signal(name=f"idle{h}")  # nothing in flight to the link
        self.snd_on = Signal(name=f"snd_on{h}")
        self.snd_ready = Signal(name=f"snd_ready{h}")
        self.ks = Signal(range(max(2, S)), name=f"ks{h}")
        self.snd_off = Signal(range(max(2, C)), name=f"snd_off{h}")
        self.snd_need = Signal(range(items + p + 1), name=f"snd_need{h}")  # the send's item
        self.fwd_on = Signal(name=f"fwd_on{h}")
        self.k = Signal(range(max(2, S)), name=f"k{h}")
        self.step = Signal(range(2 * p - 2), name=f"step{h}")
        self.rnd = Signal(range(max(2, plan.rounds)), name=f"rnd{h}")
        self.rnd_items = Signal(range(items + p + 1), name=f"rnd_items{h}")  # rnd * p
        self.fwd_need = Signal(range(items + p + 1), name=f"fwd_need{h}")  # the popped step's item
        self.off = Signal(range(max(2, C)), name=f"off{h}")
        self.cbase = Signal(range(ne), name=f"cbase{h}")

    def start_at_go(self, m, pe_x) -> None:
        p = self.unit.plan.p
        coord = pe_x if self.h == 0 else Mux(pe_x == 0, 0, p - pe_x)
        m.d.sync += [self.x.eq(coord), self.over.eq(0)]

    def chunk_base(self, back: int):
        """((x - back) mod p) * C, from the coordinate register."""
        p, C = self.unit.plan.p, self.unit.plan.chunk
        out = (self.x - back) * C
        for j in range(back):  # x == j: wrap round
            out = Mux(self.x == j, (p - back + j) * C, out)
        return out

    def bases(self, m) -> None:
        m.d.sync += [self.send_base.eq(self.chunk_base(1)), self.fwd_base.eq(self.chunk_base(2))]

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

    def elaborate(self, m, ring) -> None:
        unit, plan, h = self.unit, self.unit.plan, self.h
        p, C, S, W, bits = plan.p, plan.chunk, plan.slice, unit.words, unit.bits
        lw = (W - 1).bit_length()
        stream = unit.stream
        m.submodules[f"buf{h}"] = buf = self.buf
        rp = buf.read_port()
        wp = buf.write_port(granularity=bits)
        self.lp = buf.write_port()  # DRAM responses: whole rows
        self.sp = buf.read_port()  # the store's
        m.submodules[f"out{h}"] = out = SyncFIFO(width=bits, depth=OUT_FIFO)
        # stage 1 (the cycle after a buffer read): a send word (s1s) or a popped word (s1)
        s1s, s1s_sel = Signal(name=f"s1s{h}"), Signal(max(1, lw), name=f"s1s_sel{h}")
        s1, s1_push, s1_write, s1_comb = (Signal(name=f"s1{s}{h}") for s in ("", "_push", "_write", "_comb"))
        s1_row, s1_sel = Signal(range(max(2, self.rows)), name=f"s1_row{h}"), Signal(max(1, lw), name=f"s1_sel{h}")
        s1_recv = Signal(bits, name=f"s1_recv{h}")
        room = Signal(name=f"room{h}")
        m.d.comb += [
            room.eq(out.level + s1 + s1s < OUT_FIFO),
            self.tx.valid.eq(out.r_rdy),
            self.tx.payload.eq(out.r_data),
            out.r_en.eq(self.tx.ready),
            self.idle.eq(~s1 & ~s1s & ~out.r_rdy),
        ]

        def row_of(a):
            return a[lw:] if lw else a

        def sel_of(a):
            return a[:lw] if lw else Const(0, 1)

        # the send part and the forward part; the send part of round j + 1 runs while the
        # forward part pops round j's last step (which neither reads the buffer nor sends)
        issue_s, issue_f = Signal(name=f"issue_s{h}"), Signal(name=f"issue_f{h}")
        addr_s, addr_f = Signal(range(plan.half), name=f"addr_s{h}"), Signal(range(plan.half), name=f"addr_f{h}")
        snd_ok = (self.snd_need < self.loaded) if stream else Const(1, 1)
        fwd_ok = ((self.step > p - 2) | (self.fwd_need < self.loaded)) if stream else Const(1, 1)
        m.d.comb += [
            addr_s.eq(self.send_base + self.snd_off + self.ks),
            addr_f.eq(self.cbase + self.off + self.k),
            issue_s.eq(ring & self.snd_on & room & snd_ok),
            issue_f.eq(ring & self.fwd_on & room & self.rx.valid & fwd_ok),
            self.rx.ready.eq(issue_f),
        ]
        names = ("send_last", "round_last", "enter_last", "step_end")
        send_last, round_last, enter_last, step_end = (Signal(name=f"{s}{h}") for s in names)
        m.d.comb += [
            send_last.eq(issue_s & (self.ks == S - 1)),
            step_end.eq(issue_f & (self.k == S - 1)),
            round_last.eq(step_end & (self.step == 2 * p - 3)),
            enter_last.eq(step_end & (self.step == 2 * p - 4)),
            self.ends.eq(round_last & (self.rnd == plan.rounds - 1)),
        ]
        with m.If(issue_s):
            m.d.sync += self.ks.eq(Mux(self.ks == S - 1, 0, self.ks + 1))
            with m.If(self.ks == S - 1):
                m.d.sync += [self.snd_on.eq(0), self.snd_need.eq(self.snd_need + p)]
        with m.If(enter_last & (self.rnd != plan.rounds - 1)):  # the next round's step 0
            m.d.sync += [self.snd_on.eq(1), self.snd_off.eq(self.off + S)]
        with m.If(issue_f):
            m.d.sync += self.k.eq(self.k + 1)
            with m.If(self.k == S - 1):
                m.d.sync += [
                    self.k.eq(0),
                    self.step.eq(self.step + 1),
                    self.fwd_need.eq(self.fwd_need + 1),
                    self.cbase.eq(Mux(self.cbase == 0, (p - 1) * C, self.cbase - C)),
                ]
        start = Signal(name=f"start{h}")
        m.d.comb += start.eq((send_last | self.snd_ready) & (~self.fwd_on | round_last))
        with m.If(start):
            m.d.sync += [
                self.fwd_on.eq(1),
                self.step.eq(0),
                self.k.eq(0),
                self.cbase.eq(self.fwd_base),
                self.snd_ready.eq(0),
                self.fwd_need.eq(self.rnd_items + 1),
            ]
            with m.If(round_last):
                m.d.sync += [
                    self.rnd.eq(self.rnd + 1),
                    self.off.eq(self.off + S),
                    self.rnd_items.eq(self.rnd_items + p),
                    self.fwd_need.eq(self.rnd_items + p + 1),
                ]
        with m.Elif(send_last):
            m.d.sync += self.snd_ready.eq(1)
        with m.If(round_last & ~start):
            m.d.sync += self.fwd_on.eq(0)
        with m.If(self.ends):
            m.d.sync += self.over.eq(1)

        with m.If(issue_s):
            m.d.comb += rp.addr.eq(row_of(addr_s))
        with m.Elif(issue_f):
            m.d.comb += rp.addr.eq(row_of(addr_f))
        last_rs = p - 2
        m.d.sync += [
            s1s.eq(issue_s),
            s1s_sel.eq(sel_of(addr_s)),
            s1.eq(issue_f),
            s1_row.eq(row_of(addr_f)),
            s1_sel.eq(sel_of(addr_f)),
            s1_recv.eq(self.rx.payload.as_value()),
        ]
        with m.If(issue_f):
            m.d.sync += [
                s1_comb.eq(self.step <= last_rs),
                s1_write.eq(self.step >= last_rs),
                s1_push.eq(self.step < 2 * p - 3),
            ]

        # stage 1: the ALU, the push to the link and the write back
        def word(sel):
            return rp.data.word_select(sel, bits) if W > 1 else rp.data

        val = Signal(bits, name=f"val{h}")
        m.d.comb += val.eq(Mux(s1_comb, unit.alu(s1_recv, word(s1_sel)), s1_recv))
        m.d.comb += [out.w_en.eq(s1s | (s1 & s1_push)), out.w_data.eq(Mux(s1s, word(s1s_sel), val))]
        with m.If(s1 & s1_write):
            m.d.comb += [wp.addr.eq(s1_row), wp.data.eq(Cat(*([val] * W))), wp.en.eq((Const(1, W) << s1_sel)[:W])]

        # a final item (slice) is written two cycles after its last pop
        final = (step_end & (self.step >= last_rs)) if stream else self.ends
        f1, f2 = Signal(name=f"final1_{h}"), Signal(name=f"final2_{h}")
        m.d.sync += [f1.eq(final), f2.eq(f1)]
        with m.If(f2):
            m.d.sync += self.finished.eq(self.finished + 1)


class _LoadStore:
    """The unit's DRAM side: the load of every engine's half into its buffer, item by item in
    turn, and the store of the final items from the buffers (see RingAllReduce)."""

    def __init__(self, unit: RingAllReduce, m, engines: list, rows: int, items: int):
        plan = unit.plan
        self.unit, self.m, self.engines, self.rows, self.items = unit, m, engines, rows, items
        total = rows * plan.dirs  # beats of the whole vector
        self.total = total
        self.req, self.resp = Signal(range(total + 1), name="req"), Signal(range(total + 1), name="resp")
        self.st_rd, self.st_sent = Signal(range(total + 1), name="st_rd"), Signal(range(total + 1), name="st_sent")
        self.reqs = _Turns(unit, engines, "req", load=True)
        self.resps = _Turns(unit, engines, "resp", load=True)
        self.st_rows = _Turns(unit, engines, "st", load=False)
        self.wr_rows = _Turns(unit, engines, "wr", load=False)
        self.first = plan.first_beats(unit.words)

    def reset_at_go(self, m) -> None:
        m.d.sync += [self.req.eq(0), self.resp.eq(0), self.st_rd.eq(0), self.st_sent.eq(0)]
        for e in self.engines:
            m.d.sync += [e.loaded.eq(0), e.finished.eq(0)]

    def reset_walks(self, m) -> None:
        for turns in (self.reqs, self.resps, self.st_rows, self.wr_rows):
            turns.reset(m)

    def ring_may_start(self):
        return self.unit.rd_resp.valid & (self.resp == self.first - 1)

    def stored(self):
        return self.st_sent == self.total

    def elaborate(self, loading, src, dst) -> None:
        m, unit, engines = self.m, self.unit, self.engines
        W, bits = unit.words, unit.bits
        # the load: one request per cycle from LOAD on, each response written to its row
        m.d.comb += [
            unit.rd_req.valid.eq(loading & (self.req != self.total)),
            unit.rd_req.addr.eq(src + self.reqs.dram_addr()),
        ]
        with m.If(unit.rd_req.valid & unit.rd_req.ready):
            m.d.sync += self.req.eq(self.req + 1)
            self.reqs.step(m)
        row = Cat(*(unit.rd_resp.data[j * unit.dram_bits : j * unit.dram_bits + bits] for j in range(W)))
        for h, e in enumerate(engines):
            m.d.comb += [e.lp.addr.eq(self.resps.walks[h].row()), e.lp.data.eq(row)]
            m.d.comb += e.lp.en.eq(unit.rd_resp.valid & self.resps.turn_is(h))
            with m.If(unit.rd_resp.valid & self.resps.turn_is(h) & self.resps.walks[h].item_end()):
                m.d.sync += e.loaded.eq(e.loaded + 1)
        with m.If(unit.rd_resp.valid):
            m.d.sync += self.resp.eq(self.resp + 1)
            self.resps.step(m)
        m.d.comb += unit.rd_resp.ready.eq(1)

        # the store: buffer rows (a read port of each buffer) -> the write queue -> the
        # arbiter, an item's rows once the item is final (its last write two cycles back)
        m.submodules.wq = wq = SyncFIFO(width=W * unit.dram_bits, depth=4)
        st1, st1_turn = Signal(), Signal(range(max(2, len(engines))))
        st_items = [Signal(range(self.items + 1), name=f"st_items{h}") for h in range(len(engines))]
        may = Const(0, 1)
        for h, e in enumerate(engines):
            may = may | (self.st_rows.turn_is(h) & (st_items[h] < e.finished))
            m.d.comb += e.sp.addr.eq(self.st_rows.walks[h].row())
        with m.If((self.st_rd != self.total) & (wq.level + st1 < 3) & may):
            m.d.sync += [self.st_rd.eq(self.st_rd + 1), st1.eq(1), st1_turn.eq(self.st_rows.turn)]
            for h in range(len(engines)):
                with m.If(self.st_rows.turn_is(h) & self.st_rows.walks[h].item_end()):
                    m.d.sync += st_items[h].eq(st_items[h] + 1)
            self.st_rows.step(m)
        with m.Else():
            m.d.sync += st1.eq(0)
        with m.If(unit.wr_sent):
            m.d.sync += self.st_sent.eq(self.st_sent + 1)
        data = engines[0].sp.data
        for h in range(1, len(engines)):
            data = Mux(st1_turn == h, engines[h].sp.data, data)
        m.d.comb += [
            wq.w_en.eq(st1),
            wq.w_data.eq(Cat(*(_widen(data[j * bits : (j + 1) * bits], unit.dram_bits) for j in range(W)))),
            unit.wr.valid.eq(wq.r_rdy),
            unit.wr.data.eq(wq.r_data),
            unit.wr.addr.eq(dst + self.wr_rows.dram_addr()),
            unit.wr.mask.eq((1 << W) - 1),
            wq.r_en.eq(unit.wr.ready),
        ]
        with m.If(unit.wr.valid & unit.wr.ready):
            self.wr_rows.step(m)


class _Turns:
    """The beats of every engine's half in one order: an item (a slice; when not streaming,
    the whole half) of engine 0, one of engine 1, ..., then the next item of each. Per
    engine a _Walk; `turn` is the engine whose item is next. Load walks take an engine's
    chunks in the order it reads them (x - 1, x - 2, ...), store walks in the order they
    become final (x, x - 1, ...)."""

    def __init__(self, unit: RingAllReduce, engines: list, name: str, load: bool):
        self.unit, self.engines, self.load = unit, engines, load
        self.walks = [_Walk(unit, f"{name}{h}") for h in range(len(engines))]
        self.turn = Signal(range(max(2, len(engines))), name=f"{name}_turn")

    def turn_is(self, h: int):
        return self.turn == h if len(self.engines) > 1 else Const(1, 1)

    def reset(self, m) -> None:
        m.d.sync += self.turn.eq(0)
        for e, walk in zip(self.engines, self.walks):
            walk.reset(m, e.chunk_base(1 if self.load else 0) if self.unit.stream else 0)

    def step(self, m) -> None:
        H = len(self.engines)
        for h, walk in enumerate(self.walks):
            with m.If(self.turn_is(h)):
                walk.step(m)
                if H > 1:
                    with m.If(walk.item_end()):
                        m.d.sync += self.turn.eq((h + 1) % H)

    def dram_addr(self):
        """The word address, relative to the vector's base, of the next beat."""
        half = self.unit.plan.half
        out = self.walks[0].addr
        for h in range(1, len(self.walks)):
            out = Mux(self.turn == h, self.walks[h].addr + h * half, out)
        return out


class _Walk:
    """One engine's beats in item order: the beats of an item (a slice of S words of a
    chunk; when not streaming, the whole half), the items of one round chunk after chunk
    going down (mod p) from the first chunk, then the next round."""

    def __init__(self, unit: RingAllReduce, name: str):
        plan, W = unit.plan, unit.words
        self.W, self.p, self.C, self.S = W, plan.p, plan.chunk, plan.slice
        self.item_beats = plan.slice // W if unit.stream else plan.half // W
        self.per_round = plan.p if unit.stream else 1
        ne = plan.half
        self.b = Signal(range(max(2, self.item_beats)), name=f"{name}_b")
        self.s = Signal(range(max(2, self.per_round)), name=f"{name}_s")
        self.first = Signal(range(ne + 1), name=f"{name}_first")  # the first chunk's base
        self.cbase = Signal(range(ne + 1), name=f"{name}_cbase")  # chunk * C
        self.rbase = Signal(range(ne + 1), name=f"{name}_rbase")  # round * S
        self.addr = Signal(range(ne + W), name=f"{name}_addr")  # cbase + rbase + b * W

    def reset(self, m, first) -> None:
        m.d.sync += [
            self.b.eq(0),
            self.s.eq(0),
            self.first.eq(first),
            self.cbase.eq(first),
            self.rbase.eq(0),
            self.addr.eq(first),
        ]

    def row(self):
        return self.addr[(self.W - 1).bit_length() :] if self.W > 1 else self.addr

    def item_end(self):
        return self.b == self.item_beats - 1

    def step(self, m) -> None:
        with m.If(~self.item_end()):
            m.d.sync += [self.b.eq(self.b + 1), self.addr.eq(self.addr + self.W)]
        with m.Elif(self.s != self.per_round - 1):
            down = Mux(self.cbase == 0, (self.p - 1) * self.C, self.cbase - self.C)
            m.d.sync += [self.b.eq(0), self.s.eq(self.s + 1), self.cbase.eq(down), self.addr.eq(down + self.rbase)]
        with m.Else():
            m.d.sync += [
                self.b.eq(0),
                self.s.eq(0),
                self.cbase.eq(self.first),
                self.rbase.eq(self.rbase + self.S),
                self.addr.eq(self.first + self.rbase + self.S),
            ]


def _widen(v, width: int):
    """`v` zero-extended to `width` bits (a DRAM word: upper bits zero)."""
    return v if len(v) >= width else Cat(v, Const(0, width - len(v)))
