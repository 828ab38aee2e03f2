"""A link between neighbouring PEs of a mesh: a stream of beats with credit-based flow control.

A link carries data only (no packets, no headers: both ends know the schedule at build time).
It is made of three parts, each a component, so a mesh top can place the wire between PEs:

    PE --i--> LinkTx ==link==> LinkWire ==link==> LinkRx --o--> PE
                     <-credit-          <-credit-

`i` and `o` are valid/ready streams (amaranth.lib.stream: a transfer happens in a cycle where
both valid and ready are high; valid, once high, stays high with the same payload until ready).
A beat is `words` words of `word_bits` bits (data.ArrayLayout: word k in bits
[k*word_bits, (k+1)*word_bits), as on the DRAM channel). `link` (link_signature) has no ready:

    link.valid, link.data   sender -> receiver   a beat, in each cycle valid is high
    link.credit             receiver -> sender   one credit back, in each cycle it is high

The receiver has a FIFO of `depth` (D) beats; the sender holds D credits, spends one per beat
and gets one back per credit pulse, so at most D beats are ever on their way or in the FIFO
and the receiver never refuses one. The wire is `latency` (L) registers each way.

Timing (cycle t: the cycle of a transfer or of a pulse; hwgen/timing.py holds the formulas):

    a beat into LinkTx in t  ->  on LinkRx's `o` from t + L + LINK_EXTRA (link_beat_latency),
                                 when the receiver's FIFO is empty or its consumer takes each
                                 beat as it comes (LINK_EXTRA = 2: the sender's register and
                                 the receiver's output register)
    a beat out of LinkRx in t ->  its credit usable by LinkTx in t + L

A credit is thus away for link_round_trip(L) = 2L + 2 cycles when the consumer is always
ready. With the sender always having a beat and the consumer always ready, beat k enters the
sender in cycle link_send_cycle(k, L, D) = k + (k // D) * max(0, 2L + 2 - D) after the first:

    D >= 2L + 2   one beat per cycle: N beats take link_beat_latency(L) + N - 1 cycles from the
                  first beat's transfer to the last beat's appearance (link_cycles);
    D <  2L + 2   bursts of D beats, one burst per 2L + 2 cycles: D / (2L + 2) beats per cycle.

The default depth, link_depth(L), is the smallest power of two >= 2L + 2 (8 cycles: 32 beats).
"""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..timing import LINK_SKID, link_depth
from .bram import BlockRam


def beat_layout(word_bits: int, words: int) -> data.ArrayLayout:
    """A beat: `words` words of `word_bits` bits, word k in bits [k*word_bits, (k+1)*word_bits)."""
    return data.ArrayLayout(word_bits, words)


def beat_stream(word_bits: int, words: int) -> stream.Signature:
    """A PE's side of a link: a valid/ready stream of beats (as seen from the producer)."""
    return stream.Signature(beat_layout(word_bits, words))


def link_signature(word_bits: int, words: int) -> wiring.Signature:
    """The wire side of a link, as seen from the sender: valid and data forward, credit back."""
    return wiring.Signature(
        {
            "valid": Out(1),
            "data": Out(beat_layout(word_bits, words)),
            "credit": In(1),
        }
    )


def _check(word_bits: int, words: int, latency: int, depth: int) -> None:
    if word_bits < 1 or words < 1:
        raise ValueError(f"a link beat needs word_bits >= 1 and words >= 1, not {word_bits} and {words}")
    if latency < 0:
        raise ValueError(f"a link's latency must be >= 0, not {latency}")
    if depth < 1:
        raise ValueError(f"a link's receive FIFO needs depth >= 1, not {depth}")


class LinkTx(wiring.Component):
    """The sender end of a link: takes beats from the PE and sends one per credit.

    It holds `depth` credits after reset. `i.ready` is high in a cycle where it holds a credit
    or a credit comes back on `link.credit` that cycle (an OR of two flip-flops: a registered
    "has credits" flag and the wire's last credit register, or with latency 0 the receiver's
    credit). A transfer on `i` in cycle t
    spends a credit and drives `link.valid` (and the beat on `link.data`) in cycle t + 1, from
    flip-flops. Each cycle with `link.credit` high gives one credit back.

    Members: `i` (In(beat_stream): beats from the PE), `link` (Out(link_signature)).
    """

    def __init__(self, word_bits: int = 32, words: int = 1, depth: int | None = None, latency: int = 8):
        depth = link_depth(latency) if depth is None else depth
        _check(word_bits, words, latency, depth)
        self.word_bits, self.words, self.depth = word_bits, words, depth
        super().__init__(
            {
                "i": In(beat_stream(word_bits, words)),
                "link": Out(link_signature(word_bits, words)),
            }
        )

    def elaborate(self, platform):
        m = Module()
        credits = Signal(range(self.depth + 1), init=self.depth)
        some = Signal(init=1)  # credits != 0, kept in a flip-flop
        send = Signal()
        m.d.comb += [
            self.i.ready.eq(some | self.link.credit),
            send.eq(self.i.valid & self.i.ready),
        ]
        left = Signal(range(self.depth + 2))
        m.d.comb += left.eq(credits + self.link.credit - send)
        m.d.sync += [credits.eq(left), some.eq(left != 0), self.link.valid.eq(send)]
        beat = Signal(len(self.link.data.as_value()), reset_less=True)
        with m.If(send):
            m.d.sync += beat.eq(self.i.payload.as_value())
        m.d.comb += self.link.data.eq(beat)
        return m


class LinkWire(wiring.Component):
    """The channel between two PEs: `latency` register stages forward (valid and data) and
    `latency` stages back (credit).

    `rx.valid` and `rx.data` in cycle t + latency are `tx.valid` and `tx.data` of cycle t;
    `tx.credit` in cycle t + latency is `rx.credit` of cycle t. Valid and credit registers
    reset to 0 (nothing in flight); data registers have no reset. With latency 0 it is wires.

    Members: `tx` (In(link_signature): from the sender), `rx` (Out(link_signature): to the
    receiver).
    """

    def __init__(self, word_bits: int = 32, words: int = 1, latency: int = 8):
        _check(word_bits, words, latency, 1)
        self.word_bits, self.words, self.latency = word_bits, words, latency
        sig = link_signature(word_bits, words)
        super().__init__({"tx": In(sig), "rx": Out(sig)})

    def elaborate(self, platform):
        m = Module()
        valid, beat, credit = self.tx.valid, self.tx.data.as_value(), self.rx.credit
        for s in range(self.latency):
            v = Signal(name=f"valid_{s}")
            d = Signal(len(beat), name=f"data_{s}", reset_less=True)
            c = Signal(name=f"credit_{s}")
            m.d.sync += [v.eq(valid), d.eq(beat), c.eq(credit)]
            valid, beat, credit = v, d, c
        m.d.comb += [self.rx.valid.eq(valid), self.rx.data.eq(beat), self.tx.credit.eq(credit)]
        return m


class LinkRx(wiring.Component):
    """The receiver end of a link: a FIFO of `depth` beats that never refuses a beat (the
    sender's credits keep it from overflowing), shown to the PE on `o`, and one credit back
    per beat the PE takes.

    The FIFO's head is min(depth, LINK_SKID) output registers (`o.payload` is one of them
    through an and-or multiplexer; `o.valid` is "the registers hold a beat"). A FIFO deeper
    than LINK_SKID also has a RAM of `depth` beats behind them (hw/bram.py's BlockRam: read
    data two cycles after the address; DP16KD blocks on ECP5 from 128 beats deep, LUT RAM
    below; a power-of-two depth fills its address range).

    A beat on `link` in cycle t goes straight into the output registers, shown on `o` from
    cycle t + 1, when there is no RAM, or the RAM is empty, no read of it is in flight and the
    registers hold fewer than LINK_SKID beats (so always while the PE takes beats as they
    come). Otherwise it
    is written to the RAM: the RAM is read whenever it holds beats and the output registers
    plus the reads in flight hold fewer than LINK_SKID, and a read in cycle u lands in the
    output registers for cycle u + 3 (shown at the earliest in t + 4). LINK_SKID = 4 registers
    cover that read, so the FIFO shows a beat every cycle while it holds any and the PE takes
    them. Every choice is made from flip-flops, not from `o.ready`.

    `link.credit` is high in each cycle the PE takes a beat (`o.valid & o.ready`).

    Members: `link` (In(link_signature)), `o` (Out(beat_stream): beats to the PE).
    """

    def __init__(self, word_bits: int = 32, words: int = 1, depth: int | None = None, latency: int = 8):
        depth = link_depth(latency) if depth is None else depth
        _check(word_bits, words, latency, depth)
        self.word_bits, self.words, self.depth = word_bits, words, depth
        super().__init__(
            {
                "link": In(link_signature(word_bits, words)),
                "o": Out(beat_stream(word_bits, words)),
            }
        )

    def elaborate(self, platform):
        m = Module()
        width = self.word_bits * self.words
        skid = min(self.depth, LINK_SKID)
        regs = [Signal(width, name=f"skid_{k}", reset_less=True) for k in range(skid)]
        head = Signal(range(max(2, skid)))  # the register shown on `o`
        tail = Signal(range(max(2, skid)))  # the register the next beat goes to
        count = Signal(range(skid + 1))
        take = Signal()
        m.d.comb += [
            self.o.valid.eq(count != 0),
            self.o.payload.eq(_one_of([(head == k, r) for k, r in enumerate(regs)])),
            take.eq(self.o.valid & self.o.ready),
            self.link.credit.eq(take),
        ]
        arriving = self.link.data.as_value()
        push, push_data = Signal(), Signal(width)
        if self.depth > skid:
            ram = BlockRam(width, self.depth, 1, "ram")
            ram.elaborate_into(m)
            # the RAM never reads the entry written in the same cycle (which a DP16KD does not
            # promise): a read needs level != 0, which counts earlier writes only, and the
            # sender's credits keep level < depth when a beat arrives, so wptr != rptr then
            level = Signal(range(self.depth + 1))  # beats in the RAM not yet read
            wptr, rptr = Signal(range(self.depth)), Signal(range(self.depth))
            read_1, read_2 = Signal(), Signal()  # a read issued one / two cycles ago
            bypass, to_ram, read = Signal(), Signal(), Signal()
            m.d.comb += [
                bypass.eq((level == 0) & ~read_1 & ~read_2 & (count < skid)),
                to_ram.eq(self.link.valid & ~bypass),
                read.eq((level != 0) & (count + read_1 + read_2 < skid)),
                ram.w_en.eq(to_ram),
                ram.w_addr.eq(wptr),
                ram.w_data.eq(arriving),
                ram.r_addr[0].eq(rptr),
                push.eq((self.link.valid & bypass) | read_2),
                push_data.eq(Mux(read_2, ram.r_data[0], arriving)),
            ]
            m.d.sync += [level.eq(level + to_ram - read), read_1.eq(read), read_2.eq(read_1)]
            with m.If(to_ram):
                m.d.sync += wptr.eq(Mux(wptr == self.depth - 1, 0, wptr + 1))
            with m.If(read):
                m.d.sync += rptr.eq(Mux(rptr == self.depth - 1, 0, rptr + 1))
        else:
            m.d.comb += [push.eq(self.link.valid), push_data.eq(arriving)]
        with m.If(push):
            m.d.sync += tail.eq(Mux(tail == skid - 1, 0, tail + 1))
        for k in range(skid):
            with m.If(push & (tail == k)):
                m.d.sync += regs[k].eq(push_data)
        with m.If(take):
            m.d.sync += head.eq(Mux(head == skid - 1, 0, head + 1))
        m.d.sync += count.eq(count + push - take)
        return m


class Link(wiring.Component):
    """A whole link, sender, wire and receiver in one: beats into `i` come out of `o` (for
    tests, and a PE's loop-back). Timing as the module's docstring says.

    Members: `i` (In(beat_stream)), `o` (Out(beat_stream)); its parts are `tx`, `wire`, `rx`.
    """

    def __init__(self, word_bits: int = 32, words: int = 1, latency: int = 8, depth: int | None = None):
        depth = link_depth(latency) if depth is None else depth
        _check(word_bits, words, latency, depth)
        self.word_bits, self.words, self.latency, self.depth = word_bits, words, latency, depth
        self.tx = LinkTx(word_bits, words, depth, latency)
        self.wire = LinkWire(word_bits, words, latency)
        self.rx = LinkRx(word_bits, words, depth, latency)
        super().__init__({"i": In(beat_stream(word_bits, words)), "o": Out(beat_stream(word_bits, words))})

    def elaborate(self, platform):
        m = Module()
        m.submodules.tx = tx = self.tx
        m.submodules.wire = wire = self.wire
        m.submodules.rx = rx = self.rx
        wiring.connect(m, wiring.flipped(self.i), tx.i)
        wiring.connect(m, tx.link, wire.tx)
        wiring.connect(m, wire.rx, rx.link)
        wiring.connect(m, rx.o, wiring.flipped(self.o))
        return m


def _one_of(choices: list):
    """The value whose condition holds (an and-or: at most one holds; none gives 0)."""
    if len(choices) == 1:
        return choices[0][1]
    out = 0
    for cond, value in choices:
        out = out | (value & cond.replicate(len(value)))
    return out
