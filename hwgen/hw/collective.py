"""Collective units of a mesh PE: `RingAllReduce`, an all-reduce over a one-way ring.

The unit is a client of the PE's DRAM arbiter (one read client, one write client, like a
LoadUnit and a StoreUnit) and drives the PE's ring link (LinkTx / LinkRx, hw/link.py). Every
PE runs the same unit; its ring coordinate `pe_x` is an input port, sampled at `go`.

Data: a local vector of `n` words (`n` = p * C: p chunks of C words) at `src_base` in DRAM;
the reduced vector goes to `dst_base`. One run:

    LOAD    read the n words into a local buffer (n / W rows of the W words of a DRAM beat):
            one read request per cycle, each response written to its row. With several
            rounds and slices of whole beats the operand streams in round by round (round
            j's slice of every chunk, then round j + 1's) and the ring starts once round 0's
            p S / W beats are in; the rest arrive W words a cycle, faster than the ring uses
            them, and a round's first send also waits for its slices (only under DRAM
            jitter can that matter). Otherwise the ring starts once all n / W are in.
    RING    R = C / S rounds; round j works on words j*S .. j*S + S - 1 of every chunk
            (S, the slice, is at most the receive FIFO's depth, so no ring can deadlock:
            every PE's first step fits in its neighbour's FIFO). Two engines:
      send  step 0: push the S words of chunk (x - 1) mod p to the link, one per cycle;
            round j + 1's runs during round j's last step (which neither reads nor sends)
      fwd   once its round's step 0 is sent, pop the 2(p-1)S words the upstream PE sends,
            in order; the word k of step s belongs to chunk (x - s - 2) mod p:
              s <  p - 2        reduce-scatter: send (received op local) on as step s + 1
              s == p - 2        last reduce-scatter step: the chunk is reduced; keep it and
                                send it on (all-gather step p - 1)
              p - 2 < s < 2p-3  all-gather: keep the received word and send it on
              s == 2p - 3       all-gather, last step: keep it
    DRAIN   wait until every word sent has left for the link
    STORE   wait until the result is written to dst_base: a store engine (a read port of
            its own) writes a round's rows, one beat per cycle, from two cycles after the
            round's last word is written (when streaming, in the rounds that follow; else
            all of them after the last round)

A popped (or, by the send engine, a read) word reads the buffer in cycle t; in t + 1 the ALU (`op`:
wrapping add, signed/unsigned max or min, one LUT level of logic, no register) combines it
and pushes the result into a 4-deep link FIFO and writes the buffer. Words are popped or
read only while that FIFO, counting the word in flight, has room, so the link's
backpressure never loses a word.

Timing (model.ring_allreduce_cycles restates it; simulation checks it to the cycle). DRAM
latency Lm, link latency L, beats = n / W, F = L + RING_HOP (4) the hop from a PE's pop of a
word to its neighbour's pop of the word it sends on: popped in t, pushed in t + 1, into
LinkTx in t + 2, on the wire from t + 3, in the receiver's output register L cycles later,
popped in t + 4 + L. Every PE runs the same timeline (SPMD, same DRAM latency), so:

    go -> first send     first + Lm + RING_LOAD (4), first = p S / W beats when streaming,
                         else n / W: BASES, then one request per cycle, each answered
                         Lm + 2 cycles later through the arbiter's registers
    one round            (2p - 2) * max(S, F), from its first send to the next round's:
                         the send engine pushes S words, then the first word of each step
                         is popped max(S, F) after the first of the step before (one pop a
                         cycle, and a word needs F to come round); the next round's sends
                         start with this round's last step
    the last round       + S: its last step's S words
    last pop -> done     first + RING_STORE (6): the last round's rows (all rows when not
                         streaming), one row read and one DRAM write per cycle; done once
                         the channel has taken the last

The receive FIFO holds D >= S + L + 2 words, so credits never stall the sender (the step-0
words wait in the FIFO until its owner pops them; their credits take L cycles back).

Members: go, done, pe_x: In, src_base, dst_base: In(addr), rd_req, rd_resp, wr, wr_sent
(the arbiter client ports), tx: Out(beat_stream) (to LinkTx.i), rx: In(beat_stream) (from
LinkRx.o).
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
    in slices of `slice` words, over links of `latency` cycles with receive FIFOs of
    `depth` beats."""

    n: int
    p: int
    slice: int
    depth: int
    latency: int
    op: str
    dtype: object
    src: str
    dst: str

    @property
    def rounds(self) -> int:
        return self.n // self.p // self.slice

    def streams(self, words: int) -> bool:
        """Whether the operand streams in round by round (see RingAllReduce): with several
        rounds and slices of whole DRAM beats."""
        return self.rounds > 1 and self.slice % words == 0

    def first_beats(self, words: int) -> int:
        """DRAM beats read before the ring starts: round 0's slices when streaming, else all."""
        return self.p * self.slice // words if self.streams(words) else self.n // words


OUT_FIFO = 4  # words between the ALU and the link sender
STATES = ("IDLE", "BASES", "LOAD", "RING", "DRAIN", "STORE")


class RingAllReduce(wiring.Component):
    """See the module docstring. `n` words of `bits` bits (`signed` for max / min) over a
    ring of `p` PEs, in slices of `slice_words`; DRAM beats of `words` words of `dram_bits`
    bits at `addr_bits`-bit word addresses."""

    def __init__(
        self,
        n: int,
        p: int,
        slice_words: int,
        op: str,
        bits: int,
        signed: bool,
        words: int,
        dram_bits: int,
        addr_bits: int,
    ):
        if op not in OPS:
            raise ValueError(f"unknown ring operation {op!r}")
        if p < 2 or n % p:
            raise ValueError(f"a ring all-reduce of {n} words needs p >= 2 dividing it, not {p}")
        chunk = n // p
        if chunk % slice_words:
            raise ValueError(f"slice {slice_words} does not divide chunk {chunk}")
        if words & (words - 1) or n % words:
            raise ValueError(f"DRAM beats of {words} words must be a power of two dividing {n}")
        self.n, self.p, self.chunk, self.slice = n, p, chunk, slice_words
        # stream the operand in round by round (the ring starts once round 0's slices are
        # in): with several rounds and slices of whole beats; else read it all first
        self.stream = chunk // slice_words > 1 and slice_words % words == 0
        self.rounds = chunk // slice_words
        self.op, self.bits, self.signed = op, bits, signed
        self.words, self.dram_bits, self.addr_bits = words, dram_bits, addr_bits
        data_bits = words * dram_bits
        super().__init__(
            {
                "go": In(1),
                "done": Out(1),
                "pe_x": In(range(p)),
                "src_base": In(addr_bits),
                "dst_base": In(addr_bits),
                "rd_req": Out(memchannel.read_request(addr_bits)),
                "rd_resp": In(memchannel.read_response(data_bits)),
                "wr": Out(memchannel.write(addr_bits, data_bits, words)),
                "wr_sent": In(1),
                "tx": Out(beat_stream(bits, 1)),
                "rx": In(beat_stream(bits, 1)),
            }
        )

    def _alu(self, a, b):
        if self.op == "add":
            return (a + b)[: self.bits]
        x, y = (a.as_signed(), b.as_signed()) if self.signed else (a, b)
        return Mux(x > y, a, b) if self.op == "max" else Mux(x < y, a, b)

    def elaborate(self, platform):
        m = Module()
        n, p, C, S, W, bits = self.n, self.p, self.chunk, self.slice, self.words, self.bits
        rows = n // W
        lw = (W - 1).bit_length()
        buf = Memory(shape=unsigned(W * bits), depth=rows, init=[])
        m.submodules.buf = buf
        rp = buf.read_port()
        wp = buf.write_port(granularity=bits)
        lp = buf.write_port()  # DRAM responses: whole rows
        out = SyncFIFO(width=bits, depth=OUT_FIFO)
        m.submodules.out = out
        wq = SyncFIFO(width=W * self.dram_bits, depth=4)
        m.submodules.wq = wq

        # the PE's chunk bases, from its coordinate
        x = Signal(range(p))
        send_base = Signal(range(n))  # ((x - 1) mod p) * C
        fwd_base = Signal(range(n))  # ((x - 2) mod p) * C
        src, dst = Signal(self.addr_bits), Signal(self.addr_bits)
        # counters
        req, resp = Signal(range(rows + 1)), Signal(range(rows + 1))
        # the load's walk over the operand: round by round (slices of SL words of every
        # chunk) when streaming, else in order; requests and responses walk it alike
        SL = S if self.stream else C
        req_walk, resp_walk = (
            _Walk(SL // W if self.stream else rows, p if self.stream else 1, C, SL, W, n),
            _Walk(SL // W if self.stream else rows, p if self.stream else 1, C, SL, W, n),
        )
        first = p * SL // W if self.stream else rows  # beats read before the ring starts
        loaded = Signal(range(self.rounds + 2))  # rounds whose slices are all in the buffer
        snd_rnd = Signal(range(self.rounds + 1))  # the round the send engine is on
        # the send engine: step 0 of a round, S words of chunk (x - 1) mod p from the buffer
        snd_on, snd_ready = Signal(), Signal()  # sending; a round's step 0 sent, not yet popped for
        ks = Signal(range(max(2, S)))
        snd_off = Signal(range(max(2, C)))
        # the forward engine: the 2(p - 1) S words popped in a round
        fwd_on = Signal()
        k = Signal(range(max(2, S)))
        step = Signal(range(2 * p - 2))
        rnd = Signal(range(max(2, self.rounds)))
        off = Signal(range(max(2, C)))
        cbase = Signal(range(n))
        st_rd, st_sent = Signal(range(rows + 1)), Signal(range(rows + 1))
        # the store's walk (as the load's): rows are read once their round is finished
        st_walk = _Walk(SL // W if self.stream else rows, p if self.stream else 1, C, SL, W, n)
        wr_walk = _Walk(SL // W if self.stream else rows, p if self.stream else 1, C, SL, W, n)
        st_round = Signal(range(self.rounds + 2))  # the store walk's round
        finished = Signal(range(self.rounds + 2))  # ring rounds whose words are all written
        # stage 1 (the cycle after a buffer read): a send word (s1s) or a popped word (s1)
        s1s, s1s_sel = Signal(), Signal(max(1, lw))
        s1, s1_push, s1_write, s1_comb = Signal(), Signal(), Signal(), Signal()
        s1_row, s1_sel = Signal(range(max(2, rows))), Signal(max(1, lw))
        s1_recv = Signal(bits)
        st1 = Signal()

        room = Signal()
        m.d.comb += room.eq(out.level + s1 + s1s < OUT_FIFO)
        m.d.comb += [
            self.tx.valid.eq(out.r_rdy),
            self.tx.payload.eq(out.r_data),
            out.r_en.eq(self.tx.ready),
        ]

        def row_of(a):
            return a[lw:] if lw else a

        def sel_of(a):
            return a[:lw] if lw else Const(0, 1)

        done = Signal()
        m.d.comb += self.done.eq(done)
        m.d.sync += done.eq(0)
        # the state: a register compared in an if-chain (no case statement to leave incomplete)
        state = Signal(range(len(STATES)))

        def goto(name):
            m.d.sync += state.eq(STATES.index(name))

        ring = Signal()
        m.d.comb += ring.eq(state == STATES.index("RING"))
        with m.If(state == STATES.index("IDLE")):
            with m.If(self.go):
                m.d.sync += [
                    x.eq(self.pe_x),
                    src.eq(self.src_base),
                    dst.eq(self.dst_base),
                    req.eq(0),
                    resp.eq(0),
                    loaded.eq(0),
                    st_rd.eq(0),
                    st_sent.eq(0),
                    st_round.eq(0),
                    finished.eq(0),
                ]
                for walk in (req_walk, resp_walk, st_walk, wr_walk):
                    walk.reset(m)
                goto("BASES")
        with m.Elif(state == STATES.index("BASES")):
            m.d.sync += [
                send_base.eq(Mux(x == 0, (p - 1) * C, (x - 1) * C)),
                fwd_base.eq(Mux(x == 0, (p - 2) * C, Mux(x == 1, (p - 1) * C, (x - 2) * C))),
            ]
            goto("LOAD")
        with m.Elif(state == STATES.index("LOAD")):
            with m.If(self.rd_resp.valid & (resp == first - 1)):  # round 0 starts sending
                m.d.sync += [
                    snd_on.eq(1),
                    ks.eq(0),
                    snd_off.eq(0),
                    snd_ready.eq(0),
                    snd_rnd.eq(0),
                    fwd_on.eq(0),
                    rnd.eq(0),
                    off.eq(0),
                ]
                goto("RING")
        with m.Elif(state == STATES.index("DRAIN")):
            with m.If(~s1 & ~s1s & ~out.r_rdy):
                goto("STORE")
        with m.Elif(state == STATES.index("STORE")):
            with m.If(st_sent == rows):
                m.d.sync += done.eq(1)
                goto("IDLE")

        # the load: one request per cycle from LOAD on, each response written to its row
        loading = Signal()
        m.d.comb += loading.eq((state == STATES.index("LOAD")) | ring)
        m.d.comb += [self.rd_req.valid.eq(loading & (req != rows)), self.rd_req.addr.eq(src + req_walk.word_addr())]
        with m.If(self.rd_req.valid & self.rd_req.ready):
            m.d.sync += req.eq(req + 1)
            req_walk.step(m)
        with m.If(self.rd_resp.valid):
            m.d.sync += resp.eq(resp + 1)
            resp_walk.step(m)
            with m.If(resp_walk.round_end()):
                m.d.sync += loaded.eq(loaded + 1)

        # RING: the two engines. The send engine of round j + 1 runs while the forward engine
        # pops round j's last step (which neither reads the buffer nor sends), so the link
        # stays busy across rounds; the forward engine starts a round once its step 0 is sent.
        issue_s, issue_f = Signal(), Signal()
        addr_s, addr_f = Signal(range(n)), Signal(range(n))
        m.d.comb += [
            addr_s.eq(send_base + snd_off + ks),
            addr_f.eq(cbase + off + k),
            issue_s.eq(ring & snd_on & room & ((snd_rnd < loaded) if self.stream else 1)),
            issue_f.eq(ring & fwd_on & room & self.rx.valid),
            self.rx.ready.eq(issue_f),
        ]
        send_last, round_last, enter_last = Signal(), Signal(), Signal()
        m.d.comb += [
            send_last.eq(issue_s & (ks == S - 1)),
            round_last.eq(issue_f & (k == S - 1) & (step == 2 * p - 3)),
            enter_last.eq(issue_f & (k == S - 1) & (step == 2 * p - 4)),
        ]
        with m.If(issue_s):
            m.d.sync += ks.eq(Mux(ks == S - 1, 0, ks + 1))
            with m.If(ks == S - 1):
                m.d.sync += [snd_on.eq(0), snd_rnd.eq(snd_rnd + 1)]
        with m.If(enter_last & (rnd != self.rounds - 1)):  # the next round's step 0
            m.d.sync += [snd_on.eq(1), snd_off.eq(off + S)]
        with m.If(issue_f):
            m.d.sync += k.eq(k + 1)
            with m.If(k == S - 1):
                m.d.sync += [k.eq(0), step.eq(step + 1), cbase.eq(Mux(cbase == 0, (p - 1) * C, cbase - C))]
        start = Signal()
        m.d.comb += start.eq((send_last | snd_ready) & (~fwd_on | round_last))
        with m.If(start):
            m.d.sync += [fwd_on.eq(1), step.eq(0), k.eq(0), cbase.eq(fwd_base), snd_ready.eq(0)]
            with m.If(round_last):
                m.d.sync += [rnd.eq(rnd + 1), off.eq(off + S)]
        with m.Elif(send_last):
            m.d.sync += snd_ready.eq(1)
        with m.If(round_last & ~start):
            m.d.sync += fwd_on.eq(0)
            with m.If(rnd == self.rounds - 1):
                goto("DRAIN")

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
                s1_comb.eq(step <= last_rs),
                s1_write.eq(step >= last_rs),
                s1_push.eq(step < 2 * p - 3),
            ]

        # stage 1: the ALU, the push to the link and the write back
        def word(sel):
            return rp.data.word_select(sel, bits) if W > 1 else rp.data

        val = Signal(bits)
        m.d.comb += val.eq(Mux(s1_comb, self._alu(s1_recv, word(s1_sel)), s1_recv))
        m.d.comb += [out.w_en.eq(s1s | (s1 & s1_push)), out.w_data.eq(Mux(s1s, word(s1s_sel), val))]

        # the buffer: written by DRAM responses (whole rows) or by stage 1 (one word)
        m.d.comb += [
            lp.addr.eq(resp_walk.row()),
            lp.data.eq(Cat(*(self.rd_resp.data[j * self.dram_bits : j * self.dram_bits + bits] for j in range(W)))),
            lp.en.eq(self.rd_resp.valid),
        ]
        with m.If(s1 & s1_write):
            m.d.comb += [wp.addr.eq(s1_row), wp.data.eq(Cat(*([val] * W))), wp.en.eq((Const(1, W) << s1_sel)[:W])]
        m.d.comb += self.rd_resp.ready.eq(1)

        # the store: buffer rows (a read port of its own) -> the write queue -> the arbiter,
        # each round's rows once the round is finished (its last write two cycles back), so
        # the result's write overlaps the later rounds when the operand streams
        rp2 = buf.read_port()
        done_1, done_2 = Signal(), Signal()
        m.d.sync += [done_1.eq(round_last), done_2.eq(done_1)]
        with m.If(done_2):
            m.d.sync += finished.eq(finished + 1)
        may = Signal()
        m.d.comb += may.eq((st_round < finished) if self.stream else (finished == self.rounds))
        with m.If((st_rd != rows) & (wq.level + st1 < 3) & may):
            m.d.comb += rp2.addr.eq(st_walk.row())
            m.d.sync += [st_rd.eq(st_rd + 1), st1.eq(1)]
            st_walk.step(m)
            with m.If(st_walk.round_end()):
                m.d.sync += st_round.eq(st_round + 1)
        with m.Else():
            m.d.sync += st1.eq(0)
        with m.If(self.wr_sent):
            m.d.sync += st_sent.eq(st_sent + 1)
        m.d.comb += [
            wq.w_en.eq(st1),
            wq.w_data.eq(Cat(*(_widen(rp2.data[j * bits : (j + 1) * bits], self.dram_bits) for j in range(W)))),
            self.wr.valid.eq(wq.r_rdy),
            self.wr.data.eq(wq.r_data),
            self.wr.addr.eq(dst + wr_walk.word_addr()),
            self.wr.mask.eq((1 << W) - 1),
            wq.r_en.eq(self.wr.ready),
        ]
        with m.If(self.wr.valid & self.wr.ready):
            wr_walk.step(m)
        return m


class _Walk:
    """The operand's beats in load order: `beats` beats of a slice (SL words from word
    chunk * C + round * SL), the slice of each of `chunks` chunks, then the next round."""

    def __init__(self, beats: int, chunks: int, C: int, SL: int, W: int, n: int):
        self.beats, self.chunks, self.C, self.SL, self.W = beats, chunks, C, SL, W
        self.b = Signal(range(max(2, beats)))
        self.c = Signal(range(max(2, chunks)))
        self.base = Signal(range(n + 1))  # chunk * C + round * SL
        self.rbase = Signal(range(n + 1))  # round * SL
        self.addr = Signal(range(n + W))  # base + b * W

    def reset(self, m):
        m.d.sync += [self.b.eq(0), self.c.eq(0), self.base.eq(0), self.rbase.eq(0), self.addr.eq(0)]

    def word_addr(self):
        return self.addr

    def row(self):
        return self.addr[(self.W - 1).bit_length() :] if self.W > 1 else self.addr

    def round_end(self):
        return (self.b == self.beats - 1) & (self.c == self.chunks - 1)

    def step(self, m):
        with m.If(self.b != self.beats - 1):
            m.d.sync += [self.b.eq(self.b + 1), self.addr.eq(self.addr + self.W)]
        with m.Elif(self.c != self.chunks - 1):
            m.d.sync += [
                self.b.eq(0),
                self.c.eq(self.c + 1),
                self.base.eq(self.base + self.C),
                self.addr.eq(self.base + self.C),
            ]
        with m.Else():
            m.d.sync += [
                self.b.eq(0),
                self.c.eq(0),
                self.base.eq(self.rbase + self.SL),
                self.rbase.eq(self.rbase + self.SL),
                self.addr.eq(self.rbase + self.SL),
            ]


def _widen(v, width: int):
    """`v` zero-extended to `width` bits (a DRAM word: upper bits zero)."""
    return v if len(v) >= width else Cat(v, Const(0, width - len(v)))
