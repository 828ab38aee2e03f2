"""A pipeline stage's PE (hw.pipeline, mesh/pipeline_hw.py): the stage's program run once per
micro-batch, its input received over the link from the previous stage and its output sent on
to the next.

`StageTop(top, dram, plan, names, tag_bits, link, word_bits)` wraps `top`, a Top (hw/top.py)
of the stage's compiled program, which computes one micro-batch: its input array `plan.src` (rows of one micro-batch)
and its result `plan.dst`. The wrapper runs it M = `plan.microbatches` times, pointing the
two arrays at micro-batch m's slot (base + m * words) each time, so every micro-batch has its
own place in DRAM and nothing waits for a buffer to free:

    seq     after `start`, run micro-batch m (a start pulse to the Top) once the Top is idle
            and, unless this is the first stage, `got` > m (its input has arrived); `done`
            once all M are computed and, unless this is the last stage, all are sent
    send    (not the last stage) read the output slots of computed micro-batches from DRAM,
            one request per cycle on the channel `cmem` while its response FIFO has room, and
            push each DRAM beat (W words) to the link as W / w beats of w words (LinkTx,
            `<axis>_next_tx`), slot after slot
    recv    (not the first stage) take the link's beats (LinkRx, `<axis>_prev_rx`), gather
            W / w of them into a DRAM beat and write it to the next place of the input slots;
            `got` counts the slots written whole

The sender reads and the receiver writes on `cmem`, the Top's patterns use `mem`: both
channels into the PE's one DRAM, so neither waits for the other.

Members (the same for every stage of a pipeline, so the mesh top wires them alike): start,
done, busy, cycles (as a Top's), base_<a> for every array of `names` (the union of the
stages' arrays: each stage uses its own and ignores the rest), mem and cmem (flat DRAM
channels, tags `tag_bits` wide), `<axis>_next_tx` and `<axis>_prev_rx` (link_signature; a
first stage's receiver and a last stage's sender are idle).

Timing (cycle 0: `start`): mesh/pipeline_model.py restates it.
"""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out

from . import memchannel
from .link import LinkRx, LinkTx, link_signature


@dataclass(frozen=True)
class StagePlan:
    """Stage `index` of `stages` on mesh axis `axis`: its input array `src` (`src_words` words
    a micro-batch) and result array `dst` (`dst_words`), `microbatches` runs."""

    index: int
    stages: int
    axis: str
    src: str
    dst: str
    src_words: int
    dst_words: int
    microbatches: int

    @property
    def first(self) -> bool:
        return self.index == 0

    @property
    def last(self) -> bool:
        return self.index == self.stages - 1


def send_fifo_depth(latency: int) -> int:
    """DRAM beats the sender's response FIFO holds: enough to cover a read's round trip, so the
    link is fed one beat a cycle from one slot into the next."""
    return 1 << (latency + 8 - 1).bit_length()


class StageTop(wiring.Component):
    """Stage `plan` of a pipeline; see the module docstring."""

    def __init__(self, top, dram, plan: StagePlan, names: list, tag_bits: int, link, word_bits: int):
        self.plan, self.dram, self.link, self.top = plan, dram, link, top
        self.word_bits, self.tag_bits = word_bits, tag_bits
        self.rings = ("links",)  # like a PE with collectives: a second DRAM channel, cmem
        self.unit_names = self.top.unit_names
        channel = memchannel.channel(dram.addr_bits, word_bits, dram.words_per_cycle, tag_bits)
        members = {"start": In(1), "done": Out(1), "busy": Out(1), "cycles": Out(64)}
        members.update({f"base_{n}": In(dram.addr_bits) for n in names})
        members.update({"mem": Out(channel), "cmem": Out(channel)})
        sig = link_signature(word_bits, link.words_per_cycle)
        members[f"{plan.axis}_next_tx"] = Out(sig)
        members[f"{plan.axis}_prev_rx"] = In(sig)
        super().__init__(members)

    @property
    def pe(self):
        return self.top.pe

    def sources(self) -> dict:
        """Instance path -> the user's lines each unit implements (hw/sources.py)."""
        return {f"stage.{path}": text for path, text in self.top.sources().items()}

    def elaborate(self, platform):
        m = Module()
        plan, addr = self.plan, self.dram.addr_bits
        m.submodules.stage = top = self.top
        run = Signal()  # the Top is running a micro-batch
        mb = Signal(range(plan.microbatches + 1))  # micro-batches computed
        got = Signal(range(plan.microbatches + 1))  # input slots received whole
        sent = Signal()  # every slot sent (the last stage: nothing to send)
        offs = {n: Signal(addr, name=f"off_{n}") for n in (plan.src, plan.dst)}
        base = {n: Signal(addr, name=f"base_{n}_q") for n in (plan.src, plan.dst)}
        with m.If(self.start & ~self.busy):
            m.d.sync += [self.busy.eq(1), self.done.eq(0), self.cycles.eq(0), mb.eq(0)]
            m.d.sync += [o.eq(0) for o in offs.values()]
            m.d.sync += [base[n].eq(getattr(self, f"base_{n}")) for n in base]
        with m.If(self.busy):
            m.d.sync += self.cycles.eq(self.cycles + 1)
        go = Signal()
        ready = 1 if plan.first else got != mb
        m.d.comb += go.eq(self.busy & ~run & (mb != plan.microbatches) & ready)
        m.d.comb += top.start.eq(go)
        with m.If(go):
            m.d.sync += run.eq(1)
        with m.If(run & top.done):
            m.d.sync += [run.eq(0), mb.eq(mb + 1)]
            m.d.sync += offs[plan.src].eq(offs[plan.src] + plan.src_words)
            m.d.sync += offs[plan.dst].eq(offs[plan.dst] + plan.dst_words)
        with m.If(self.busy & (mb == plan.microbatches) & sent):
            m.d.sync += [self.busy.eq(0), self.done.eq(1)]
        for d in self.top.compiled.program.drams:
            n = d.name
            value = base[n] + offs[n] if n in base else getattr(self, f"base_{n}")
            m.d.comb += getattr(top, f"base_{n}").eq(value)
        _wire_channel(m, top.mem, self.mem)
        start = self.start & ~self.busy
        self._sender(m, run & top.done, sent, base[plan.dst], start)
        self._receiver(m, got, getattr(self, f"base_{plan.src}"), start)  # sampled at start
        return m

    def _sender(self, m, finished, sent, base, start) -> None:
        plan, W, w = self.plan, self.dram.words_per_cycle, self.link.words_per_cycle
        chan, bits = self.cmem, self.word_bits
        m.d.comb += [chan.rd_resp.ready.eq(1)]
        if plan.last:
            m.d.comb += sent.eq(1)
            return
        depth, per = send_fifo_depth(self.dram.latency), plan.dst_words // W  # beats a slot
        total = per * plan.microbatches
        m.submodules.tx = tx = LinkTx(bits, w, None, self.link.latency)
        wiring.connect(m, tx.link, wiring.flipped(getattr(self, f"{plan.axis}_next_tx")))
        m.submodules.sendq = q = SyncFIFO(width=W * bits, depth=depth)
        issued = Signal(range(total + 1))  # DRAM beats requested
        allowed = Signal(range(total + 1))  # beats of the slots computed so far
        held = Signal(range(depth + 1))  # beats requested and not yet sent on whole
        pushed = Signal(range(total * (W // w) + 1))  # link beats sent
        part = Signal(range(max(2, W // w)))  # the link beat of the FIFO's head beat to send next
        with m.If(start):
            m.d.sync += [issued.eq(0), allowed.eq(0), pushed.eq(0), part.eq(0)]
        with m.Elif(finished):
            m.d.sync += allowed.eq(allowed + per)
        req = Signal()
        m.d.comb += [
            req.eq(self.busy & (issued != allowed) & (held != depth)),
            chan.rd_req.valid.eq(req),
            chan.rd_req.addr.eq(base + issued * W),
            q.w_en.eq(chan.rd_resp.valid),
            q.w_data.eq(chan.rd_resp.data),
        ]
        take = Signal()
        last_part = part == W // w - 1
        m.d.comb += [
            tx.i.valid.eq(q.r_rdy),
            tx.i.payload.eq(q.r_data.word_select(part, w * bits) if W != w else q.r_data),
            take.eq(tx.i.valid & tx.i.ready),
            q.r_en.eq(take & last_part),
        ]
        with m.If(req & chan.rd_req.ready):
            m.d.sync += issued.eq(issued + 1)
        m.d.sync += held.eq(held + (req & chan.rd_req.ready) - (take & last_part))
        with m.If(take):
            m.d.sync += [pushed.eq(pushed + 1), part.eq(Mux(last_part, 0, part + 1))]
        m.d.comb += sent.eq(pushed == total * (W // w))

    def _receiver(self, m, got, base, start) -> None:
        plan, W, w = self.plan, self.dram.words_per_cycle, self.link.words_per_cycle
        chan, bits = self.cmem, self.word_bits
        rx_port = getattr(self, f"{plan.axis}_prev_rx")
        if plan.first:  # idle: no credits back, no writes
            return
        ratio, per = W // w, plan.src_words // W
        m.submodules.rx = rx = LinkRx(bits, w, None, self.link.latency)
        wiring.connect(m, wiring.flipped(rx_port), rx.link)
        parts = [Signal(w * bits, name=f"gather{k}") for k in range(ratio - 1)]
        part = Signal(range(max(2, ratio)))
        wvalid, wdata = Signal(), Signal(W * bits)
        waddr = Signal(self.dram.addr_bits)
        left = Signal(range(per + 1))  # beats still to write of the slot being received
        stall = wvalid & ~chan.wr.ready
        last_part = part == ratio - 1
        take = Signal()
        m.d.comb += [
            rx.o.ready.eq(~(last_part & stall)),
            take.eq(rx.o.valid & rx.o.ready),
            chan.wr.valid.eq(wvalid),
            chan.wr.addr.eq(waddr),
            chan.wr.data.eq(wdata),
            chan.wr.mask.eq((1 << W) - 1),
        ]
        with m.If(start):
            m.d.sync += [got.eq(0), part.eq(0), waddr.eq(base), left.eq(per), wvalid.eq(0)]
        with m.Else():
            with m.If(wvalid & chan.wr.ready):
                m.d.sync += [wvalid.eq(0), waddr.eq(waddr + W)]
                with m.If(left == 1):
                    m.d.sync += [got.eq(got + 1), left.eq(per)]
                with m.Else():
                    m.d.sync += left.eq(left - 1)
            with m.If(take):
                m.d.sync += part.eq(Mux(last_part, 0, part + 1))
                for k, p in enumerate(parts):
                    with m.If(part == k):
                        m.d.sync += p.eq(rx.o.payload.as_value())
                with m.If(last_part):
                    m.d.sync += [wvalid.eq(1), wdata.eq(Cat(*parts, rx.o.payload.as_value()))]


def _wire_channel(m, inner, outer) -> None:
    """The Top's flat channel `inner` on the stage's `outer` (tags widened or narrowed)."""
    for name, fields, outward in (
        ("rd_req", ("valid", "addr", "tag"), True),
        ("rd_resp", ("valid", "data", "tag"), False),
        ("wr", ("valid", "addr", "data", "mask"), True),
    ):
        i, o = getattr(inner, name), getattr(outer, name)
        src, dst = (i, o) if outward else (o, i)
        m.d.comb += src.ready.eq(dst.ready)
        for f in fields:
            if hasattr(dst, f) and hasattr(src, f):
                m.d.comb += getattr(dst, f).eq(getattr(src, f))
