"""`BlockCopy`: a collective phase that moves no data between PEs: it copies the PE's own
block of an array to its place in another array in the PE's own DRAM (the block an
all-to-all or a permutation keeps on the PE: block x of the operand to block x of the result).

The unit is one read and one write client of the PE's DRAM arbiter, like a RingCollective
(hw/collective.py), and runs as one of the PE's collective phases (hw/phases.py), which adds
the block offsets to `src_base` and `dst_base`. At `go` it requests the block's B/W beats
one per cycle; each response enters a queue, and the queue's head is written, one beat per
cycle, to the same offset from `dst_base`. `done` pulses the cycle after the channel has
taken the last write. A PE that is not one of the plan's `receivers` writes zeros instead, or
(`quiet`) nothing.

Timing (model.copy_cycles restates it; simulation checks it to the cycle): with DRAM latency
Lm and beats of W words, the first request leaves the cycle after `go`, the responses come
back Lm + 2 cycles after their requests through the arbiter's registers, each is written the
cycle after, and `done` follows the last write by COPY_DONE cycles.
"""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.fifo import SyncFIFO

from .collective import blocks_of, masked, phase_members


@dataclass(frozen=True)
class CopyPlan:
    """Copy `words` words of `dtype` from DRAM array `src` to DRAM array `dst`, at the block
    offsets ((x + src_shift) mod p) * words and ((x + dst_shift) mod p) * words, x being the
    PE's coordinate along `axis` (of `p` PEs; on a zigzag ring its position x in `order`, and
    the blocks order[(x + shift) mod p])."""

    words: int
    p: int
    dtype: object
    src: str
    dst: str
    axis: str
    src_shift: int | tuple | None = 0  # see collective.blocks_of
    dst_shift: int | tuple | None = 0
    kind: str = "copy"
    receivers: int = -1  # the PEs that copy, a bit per PE of rx_axes (-1: all)
    quiet: bool = False  # the others write nothing (else zeros)
    rx_axes: tuple = ()  # (axis, size) pairs whose PEs `receivers` numbers (row-major, by coordinate)
    order: tuple = ()  # the axis' ring order (RingPlan.order): x is the PE's position in it

    @property
    def src_words(self) -> int:
        return self.words * blocks_of(self.src_shift, self.p)

    @property
    def dst_words(self) -> int:
        return self.words * blocks_of(self.dst_shift, self.p)

    @property
    def n(self) -> int:
        """Words of the whole vector (p blocks), as a RingPlan's n."""
        return self.words * self.p


class BlockCopy(wiring.Component):
    """See the module docstring: the copy of `plan` (a CopyPlan) in DRAM beats of `words`
    words of `dram_bits` bits at `addr_bits`-bit addresses, its queue sized for DRAM reads
    of `latency` cycles (longer ones, or a refused write, slow it down; nothing is lost)."""

    def __init__(self, plan: CopyPlan, words: int, dram_bits: int, addr_bits: int, latency: int):
        if plan.words % words:
            raise ValueError(f"a block of {plan.words} words is not whole DRAM beats of {words} words")
        self.plan, self.words, self.beats = plan, words, plan.words // words
        # room for every answer in flight at the DRAM's latency: reads never wait for writes
        self.depth = min(self.beats, 1 << (latency + 4).bit_length())
        super().__init__(phase_members(plan, addr_bits, words * dram_bits, words))

    def elaborate(self, platform):
        m = Module()
        n, W = self.beats, self.words
        src, dst = Signal.like(self.src_base), Signal.like(self.dst_base)
        reading, writing = Signal(), Signal()
        req, wrote, sent = Signal(range(n + 1)), Signal(range(n + 1)), Signal(range(n + 1))
        m.submodules.q = q = SyncFIFO(width=len(self.rd_resp.data), depth=self.depth)
        m.d.sync += self.done.eq(0)
        with m.If(self.go):
            m.d.sync += [src.eq(self.src_base), dst.eq(self.dst_base), reading.eq(1), writing.eq(1)]
            m.d.sync += [req.eq(0), wrote.eq(0), sent.eq(0)]
        # reads: one request a cycle, while the queue has room for every answer in flight
        room = (req - wrote) < self.depth
        m.d.comb += [self.rd_req.valid.eq(reading & room), self.rd_req.addr.eq(src + req * W)]
        with m.If(self.rd_req.valid & self.rd_req.ready):
            m.d.sync += req.eq(req + 1)
            with m.If(req == n - 1):
                m.d.sync += reading.eq(0)
        m.d.comb += [q.w_en.eq(self.rd_resp.valid), q.w_data.eq(self.rd_resp.data), self.rd_resp.ready.eq(1)]
        # writes: the queue's head to the same offset from dst
        copies = Signal()  # this PE is one of the receivers
        with m.If(self.go):
            m.d.sync += copies.eq(self.receives if masked(self.plan) else 1)
        mask = Mux(copies, (1 << W) - 1, 0) if self.plan.quiet else (1 << W) - 1
        data = q.r_data if self.plan.quiet else Mux(copies, q.r_data, 0)
        m.d.comb += [
            self.wr.valid.eq(q.r_rdy & writing),
            self.wr.data.eq(data),
            self.wr.addr.eq(dst + wrote * W),
            self.wr.mask.eq(mask),
            q.r_en.eq(self.wr.ready & writing),
        ]
        with m.If(self.wr.valid & self.wr.ready):
            m.d.sync += wrote.eq(wrote + 1)
        with m.If(self.wr_sent):
            m.d.sync += sent.eq(sent + 1)
            with m.If(sent == n - 1):
                m.d.sync += [self.done.eq(1), writing.eq(0)]
        return m
