"""An AXI4 master for a kernel's DRAM channel (hw/memchannel.py): the memory side of
`wrap="axi"` (hw/axi_top.py).

The channel moves beats of `words` words at any word address; AXI moves beats of the same
width (`words` x the word's bytes) at addresses aligned to the bus. So:

- byte address = word address x word bytes (AXI addresses of `addr_bits` + log2(word bytes)
  bits; the arrays' base addresses must be multiples of the word's bytes);
- a beat at an aligned word address is an AXI burst of one beat; one that is not is a burst
  of two (INCR), whose halves the bridge joins (reads) or splits with write strobes (writes;
  one beat when the masked words all fall in the first);
- one ID (0) each way, so responses come back in order: up to READS read requests and
  WRITES write requests of the kernel are outstanding (a split one is two bursts);
- a read that touches a bus beat of a write whose response (B) has not come back waits for
  it, which keeps the channel's contract (a read requested after a write is accepted sees
  it; one requested before may see it or not, which no single-PE kernel depends on: none
  reads what it writes); reads of other addresses pass writes in flight;
- `idle` is high when no write is outstanding (the wrapper's `done` waits for it);
- `rd_error` / `wr_error` go high on an RRESP / BRESP other than OKAY and stay high until
  `clear` (a new start).

Timing: the kernel's requests are taken into queues (of 8 reads and 8 writes) whenever they
have room (so the kernel's ready comes from flip-flops, never from an AXI input); a read
passes four registers first, beside the bridge: two for its address (which comes from across
the chip), two for its comparisons with the writes in flight (parts of them, then their
whole). It then waits in a register until the AR register is free or taken, the queue of
bursts has room and no write blocks it (that check is registered too), and appears on AR the
cycle after: about eight cycles after it was taken, one a cycle. The joined response goes to
the kernel in the cycle the last R beat of its burst arrives. A write's address and data go to AW and W from their
queues, about three cycles after it was taken. Every AXI output is a flip-flop or
a constant but `rready` (which follows `rvalid`).
"""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from . import memchannel

READS = 32  # read bursts in flight
WRITES = 16  # write bursts in flight (each one's bus beats are compared with every read)
READ_QUEUE = 8  # reads taken and not yet out of their queue (it holds them all)
PART = 8  # bits of an address compared in the first of the comparison's two cycles


def axi4(addr_bits: int, data_bits: int, id_bits: int = 1) -> wiring.Signature:
    """An AXI4 master's signals (flat, lower case: awaddr, awlen, ... rlast), from its side."""
    strb = data_bits // 8
    out = {
        "awid": id_bits,
        "awaddr": addr_bits,
        "awlen": 8,
        "awsize": 3,
        "awburst": 2,
        "awcache": 4,
        "awprot": 3,
        "awvalid": 1,
        "wdata": data_bits,
        "wstrb": strb,
        "wlast": 1,
        "wvalid": 1,
        "bready": 1,
        "arid": id_bits,
        "araddr": addr_bits,
        "arlen": 8,
        "arsize": 3,
        "arburst": 2,
        "arcache": 4,
        "arprot": 3,
        "arvalid": 1,
        "rready": 1,
    }
    into = {
        "awready": 1,
        "wready": 1,
        "bid": id_bits,
        "bresp": 2,
        "bvalid": 1,
        "arready": 1,
        "rid": id_bits,
        "rdata": data_bits,
        "rresp": 2,
        "rlast": 1,
        "rvalid": 1,
    }
    return wiring.Signature({**{k: Out(v) for k, v in out.items()}, **{k: In(v) for k, v in into.items()}})


def axi_addr_bits(addr_bits: int, word_bits: int) -> int:
    """Width of the AXI byte addresses for word addresses of `addr_bits` bits."""
    return addr_bits + (word_bits // 8 - 1).bit_length()


class AxiMaster(wiring.Component):
    """The bridge; see the module doc. Members: `mem` (the kernel's flat channel, from the
    bridge's side), `axi` (axi4), `clear`, `idle`, `rd_error`, `wr_error`."""

    def __init__(self, addr_bits: int, word_bits: int, words: int, tag_bits: int):
        if word_bits not in (8, 16, 32, 64):
            raise ValueError("AXI words are 8, 16, 32 or 64 bits")
        self.addr_bits, self.word_bits, self.words, self.tag_bits = addr_bits, word_bits, words, tag_bits
        self.data_bits = word_bits * words
        channel = memchannel.channel(addr_bits, word_bits, words, tag_bits)
        super().__init__(
            {
                "mem": In(channel),
                "axi": Out(axi4(axi_addr_bits(addr_bits, word_bits), self.data_bits)),
                "clear": In(1),
                "idle": Out(1),
                "rd_error": Out(1),
                "wr_error": Out(1),
            }
        )

    def _byte_addr(self, beat):
        """The AXI address of bus beat `beat` (a word address / words)."""
        shift = (self.data_bits // 8 - 1).bit_length()
        return Cat(Const(0, shift), beat)

    def elaborate(self, platform):
        m = Module()
        axi = self.axi
        for ch in ("ar", "aw"):
            m.d.comb += [getattr(axi, f"{ch}size").eq((self.data_bits // 8 - 1).bit_length())]
            m.d.comb += getattr(axi, f"{ch}burst").eq(1)
        # reads modifiable and bufferable; writes not bufferable, so a B comes from where the
        # data lands and `done` means every write is visible to the host
        m.d.comb += [axi.arcache.eq(0b0011), axi.awcache.eq(0b0010)]
        flight = self._writes_in_flight(m)
        self._reads(m, flight)
        self._writes(m, flight)
        with m.If(self.clear):
            m.d.sync += [self.rd_error.eq(0), self.wr_error.eq(0)]
        with m.If(axi.rvalid & axi.rready & (axi.rresp != 0)):
            m.d.sync += self.rd_error.eq(1)
        with m.If(axi.bvalid & axi.bready & (axi.bresp != 0)):
            m.d.sync += self.wr_error.eq(1)
        return m

    # ---------------------------------------------------------------- helpers

    @property
    def _lg(self) -> int:
        """Bits of a word's offset in a bus beat."""
        return (self.words - 1).bit_length()

    def _split(self, m, addr, name: str) -> tuple:
        """(bus beat, word offset in it) of a word address."""
        beat = Signal(self.addr_bits - self._lg, name=f"{name}_beat")
        off = Signal(max(self._lg, 1), name=f"{name}_off")
        m.d.comb += beat.eq(addr[self._lg :])
        if self._lg:
            m.d.comb += off.eq(addr[: self._lg])
        return beat, off

    def _last_of_page(self, beat):
        """Whether bus beat `beat` is the last of its 4 KB page (a burst must not cross one)."""
        bits = max(0, (4096 // (self.data_bits // 8) - 1).bit_length())
        return beat[:bits] == (1 << bits) - 1 if bits else Const(1, 1)

    def _address(self, m, prefix: str, beat, two, split, take):
        """The AW or AR register: on `take` it holds bus beat `beat` (a burst of `two` + 1
        beats, or with `split` two bursts of one, the second the cycle after the first is
        taken). Returns whether it can take a new request this cycle."""
        axi = self.axi
        valid, addr, length = (getattr(axi, f"{prefix}{f}") for f in ("valid", "addr", "len"))
        held = Signal(name=f"{prefix}_held")
        more = Signal(name=f"{prefix}_more")  # the second of two split bursts is still to go
        free = Signal(name=f"{prefix}_free")
        shift = (self.data_bits // 8 - 1).bit_length()
        m.d.comb += [valid.eq(held), free.eq(~held | (getattr(axi, f"{prefix}ready") & ~more))]
        with m.If(free):
            m.d.sync += [held.eq(take), more.eq(take & split)]
            m.d.sync += [addr.eq(Cat(Const(0, shift), beat)), length.eq(two & ~split)]
        with m.Elif(more & getattr(axi, f"{prefix}ready")):
            m.d.sync += [more.eq(0), addr.eq(addr + (1 << shift))]
        return free

    # ---------------------------------------------------------------- writes in flight

    def _writes_in_flight(self, m) -> dict:
        """The ring of write bursts accepted and not yet answered (B): each one's bus beats
        [lo, hi] (and lo - 1) and whether it was split in two bursts (two B responses). A write
        enters it two cycles after it is taken, from registers beside the bridge (`wr_p_*`: the
        kernel's address crosses the chip to a flip-flop; `wr_q_*`: the adders' results, which
        go to all 16 slots), which reads still see in time: they compare two cycles after they
        are taken."""
        n = WRITES
        bits = self.addr_bits - self._lg
        lo = [Signal(bits, name=f"wlo{k}") for k in range(n)]
        hi = [Signal(bits, name=f"whi{k}") for k in range(n)]
        before = [Signal(bits, name=f"wlom{k}") for k in range(n)]  # lo - 1
        split = [Signal(name=f"wsplit{k}") for k in range(n)]
        entering = Signal(n, name="wr_q_slot")  # one-hot: the slot the write taken two cycles ago takes
        live = Signal(n)
        head, tail = Signal(range(n)), Signal(range(n))
        count = Signal(range(n + 1))
        half = Signal()  # the first B of a split write at the head has come
        take, gone = Signal(), Signal()
        m.d.comb += self.idle.eq(count == 0)
        m.d.comb += self.axi.bready.eq(1)
        with m.If(self.axi.bvalid):
            with m.If(Array(split)[head] & ~half):
                m.d.sync += half.eq(1)
            with m.Else():
                m.d.comb += gone.eq(1)
                m.d.sync += [half.eq(0), head.eq(head + 1)]
        m.d.sync += count.eq(count + take - gone)
        m.d.sync += live.eq((live | entering) & ~(gone << head)[:n])
        return {
            "lo": lo,
            "hi": hi,
            "before": before,
            "split": split,
            "entering": entering,
            "live": live,
            "tail": tail,
            "count": count,
            "take": take,
        }

    def _parts(self, flight: dict, beat):
        """A read of bus beats beat .. beat + two meets a write in flight exactly when its
        first beat is the write's first or last, or its second beat (two) is the write's first
        (both span at most two beats): three comparisons for equality per write, no adders or
        carry chains. Each comparison is cut into PART-bit parts; returns, per write and
        comparison (lo, hi, before), the parts' equalities: one bit each, registered before
        `_meets` joins them (one comparison of every read with 16 writes is too much logic and
        wire for one cycle)."""
        cuts = range(0, len(beat), PART)
        return Cat(
            beat[c : c + PART] == flight[which][k][c : c + PART]
            for k in range(WRITES)
            for which in ("lo", "hi", "before")
            for c in cuts
        )

    def _meets(self, flight: dict, parts, two):
        """One bit per write in flight: whether the read whose `_parts` are `parts` meets it."""
        n = len(parts) // (3 * WRITES)  # parts per comparison
        whole = [parts[j * n : j * n + n].all() for j in range(3 * WRITES)]
        return Cat(
            flight["live"][k] & (whole[3 * k] | whole[3 * k + 1] | (two & whole[3 * k + 2])) for k in range(WRITES)
        )

    # ---------------------------------------------------------------- reads

    def _reads(self, m, flight: dict) -> None:
        axi, req, resp, W = self.axi, self.mem.rd_req, self.mem.rd_resp, self.words
        # a request passes four registers before its queue, one a cycle, never held: `rd_in`
        # takes the kernel's address (which comes from across the chip), `rd_at` takes it
        # beside the comparisons, `rd_eq` its fields and the comparisons of its bus beat with
        # the writes in flight in parts (`_parts`, from `rd_at`), `rd_chk` the joined parts
        # (`_meets`): no long wire and no wide comparison share a cycle. A write accepted
        # before the read is in the ring by the cycle `rd_eq` compares (see _writes_in_flight);
        # one accepted after may be compared with in part or not at all (a slot taken again
        # between `rd_eq` and `rd_chk`), which only makes the read wait for it or not, as the
        # channel's contract allows.
        held = Signal(name="rd_in_valid")
        addr, tag = Signal.like(req.addr, name="rd_in_addr"), Signal.like(req.tag, name="rd_in_tag")
        at_valid = Signal(name="rd_at_valid")
        at_addr, at_tag = Signal.like(req.addr, name="rd_at_addr"), Signal.like(req.tag, name="rd_at_tag")
        beat, off = self._split(m, at_addr, "rd")
        # a request then waits in `queue`, then in register `b` until the AR register is free
        # or taken, the queue of bursts has room, and none of the writes in flight when it
        # came touches its beats: `meets` marks them as it enters `rd_chk`, and it waits until
        # they are answered (their `live` bits drop; a slot taken again by a later write only
        # makes it wait longer)
        two = off != 0
        fields = {"beat": len(beat), "off": len(off), "tag": self.tag_bits, "two": 1, "split": 1, "meets": WRITES}
        layout = data.StructLayout(fields)
        queue = SyncFIFOBuffered(width=layout.size, depth=READ_QUEUE)
        m.submodules.rq = queue
        parts = self._parts(flight, beat)
        compared = {k: Signal(width, name=f"rd_eq_{k}") for k, width in fields.items() if k != "meets"}
        compared_parts = Signal(len(parts), name="rd_eq_parts")
        compared_valid = Signal(name="rd_eq_valid")
        checked = Signal(layout, name="rd_chk")
        checked_valid = Signal(name="rd_chk_valid")
        # the queue always has room for `rd_chk` (the count below), so it takes it unasked
        m.d.comb += [queue.w_data.eq(checked), queue.w_en.eq(checked_valid)]
        m.d.sync += [held.eq(req.valid & req.ready), addr.eq(req.addr), tag.eq(req.tag)]
        # no margin: a write taken the cycle before this read enters the ring in the cycle
        # `rd_at` holds the read (a register more on either side breaks the contract)
        m.d.sync += [at_valid.eq(held), at_addr.eq(addr), at_tag.eq(tag)]
        m.d.sync += [compared_valid.eq(at_valid), compared_parts.eq(parts), compared["tag"].eq(at_tag)]
        m.d.sync += [compared["beat"].eq(beat), compared["off"].eq(off), compared["two"].eq(two)]
        m.d.sync += compared["split"].eq(two & self._last_of_page(beat))
        meets = self._meets(flight, compared_parts, compared["two"])
        m.d.sync += [checked_valid.eq(compared_valid), checked.meets.eq(meets)]
        m.d.sync += [getattr(checked, k).eq(v) for k, v in compared.items()]
        # the kernel's ready is a flip-flop: the requests taken and not yet out of `queue` (in
        # the registers or in it; one that left counts until the next cycle, `out` being a
        # register) leave room in it for one more, counting one taken this cycle whenever
        # ready is high
        taken = Signal(range(READ_QUEUE + 2), name="rd_taken")
        ready = Signal(name="rd_ready")
        out = Signal(name="rd_out")
        m.d.comb += req.ready.eq(ready)
        m.d.sync += taken.eq(taken + (req.valid & ready) - out)
        m.d.sync += ready.eq(taken + ready - out < READ_QUEUE)
        a = data.View(layout, queue.r_data)
        b = {k: Signal(width, name=f"rd_b_{k}") for k, width in fields.items()}
        b_valid = Signal(name="rd_b_valid")
        pending = SyncFIFOBuffered(width=self.tag_bits + len(off) + 1, depth=READS)
        m.submodules.pending = pending
        go, move = Signal(name="rd_go"), Signal(name="rd_move")
        free = self._address(m, "ar", b["beat"], b["two"], b["split"], go)
        # `clear`: none of b's writes was in flight a cycle ago (a register: the 16 comparisons
        # with `live` do not share a cycle with the queue's control). A write answered since
        # only lets b go a cycle later; a slot taken since by a later write is one b need not
        # wait for (accepted after it)
        clear = Signal(name="rd_clear")
        m.d.comb += go.eq(b_valid & clear & free & pending.w_rdy)
        m.d.comb += [move.eq(queue.r_rdy & (~b_valid | go)), queue.r_en.eq(move)]
        m.d.sync += out.eq(move)
        stays, comes = ((x & flight["live"]) == 0 for x in (b["meets"], a.meets))
        m.d.sync += clear.eq(Mux(move, comes, stays))
        m.d.comb += [pending.w_en.eq(go), pending.w_data.eq(Cat(b["tag"], b["off"], b["two"]))]
        with m.If(move):
            m.d.sync += [b_valid.eq(1), *(b[k].eq(getattr(a, k)) for k in fields)]
        with m.Elif(go):
            m.d.sync += b_valid.eq(0)

        # responses: a beat as it comes, or the two halves of an unaligned one joined
        tag, off = pending.r_data[: self.tag_bits], pending.r_data[self.tag_bits : -1]
        two = pending.r_data[-1]  # two R beats to join (the offset is not 0)
        first = Signal(self.data_bits, name="rd_first")
        have_first = Signal(name="rd_have_first")
        both = Cat(first, axi.rdata)
        with m.Switch(off):
            for k in range(W):
                with m.Case(k):
                    bits = k * self.word_bits
                    m.d.comb += resp.data.eq(both[bits : bits + self.data_bits] if k else axi.rdata)
        m.d.comb += resp.tag.eq(tag)
        with m.If(axi.rvalid & pending.r_rdy):
            with m.If(two & ~have_first):
                m.d.comb += axi.rready.eq(1)
                m.d.sync += [first.eq(axi.rdata), have_first.eq(1)]
            with m.Else():
                m.d.comb += [resp.valid.eq(1), axi.rready.eq(resp.ready)]
                with m.If(resp.ready):
                    m.d.comb += pending.r_en.eq(1)
                    m.d.sync += have_first.eq(0)

    # ---------------------------------------------------------------- writes

    def _writes(self, m, flight: dict) -> None:
        axi, wr, W, lg = self.axi, self.mem.wr, self.words, self._lg
        beat, off = self._split(m, wr.addr, "wr")
        two = Signal(name="wr_two")  # masked words reach the next bus beat
        with m.Switch(off):
            for k in range(W):
                with m.Case(k):
                    m.d.comb += two.eq(wr.mask[W - k :] != 0 if k else 0)
        split = Signal(name="wr_split")
        m.d.comb += split.eq(two & self._last_of_page(beat))
        layout = data.StructLayout({"data": self.data_bits, "mask": W, "off": max(lg, 1), "two": 1, "split": 1})
        queue = SyncFIFOBuffered(width=layout.size, depth=8)  # W beats to send (LUT RAM: 8 cost as 4)
        m.submodules.wq = queue
        where = data.StructLayout({"beat": len(beat), "two": 1, "split": 1})
        addresses = SyncFIFOBuffered(width=where.size, depth=8)  # AW bursts to send
        m.submodules.awq = addresses
        take = flight["take"]
        # ready is a flip-flop: room for two more in the queues and the ring a cycle ago leaves
        # room for the one taken meanwhile and one now (one place of each is given up for it)
        room = Signal(name="wr_room")
        queues = (queue.w_level < queue.depth - 1) & (addresses.w_level < addresses.depth - 1)
        m.d.sync += room.eq(queues & (flight["count"] < WRITES - 1))
        m.d.comb += wr.ready.eq(room)
        m.d.comb += [take.eq(wr.valid & wr.ready), queue.w_en.eq(take), addresses.w_en.eq(take)]
        entry = data.View(layout, queue.w_data)
        m.d.comb += [entry.data.eq(wr.data), entry.mask.eq(wr.mask), entry.off.eq(off)]
        m.d.comb += [entry.two.eq(two), entry.split.eq(split)]
        at = data.View(where, addresses.w_data)
        m.d.comb += [at.beat.eq(beat), at.two.eq(two), at.split.eq(split)]
        head = data.View(where, addresses.r_data)
        issue = Signal(name="aw_issue")
        free = self._address(m, "aw", head.beat, head.two, head.split, issue)
        m.d.comb += [issue.eq(addresses.r_rdy & free), addresses.r_en.eq(issue)]
        tail = flight["tail"]
        # the write enters the ring two cycles after it is taken (see _writes_in_flight): its
        # fields in `wr_p_*` registers, then its bus beats in `wr_q_*` ones; no later, or a
        # read taken the cycle after it would not see it (see _reads)
        p_slot = Signal(WRITES, name="wr_p_slot")
        p_beat, p_two, p_split = Signal.like(beat, name="wr_p_beat"), Signal(name="wr_p_two"), Signal(name="wr_p_split")
        m.d.sync += [p_slot.eq((take << tail)[:WRITES]), p_beat.eq(beat), p_two.eq(two), p_split.eq(split)]
        q = {k: Signal.like(beat, name=f"wr_q_{k}") for k in ("lo", "hi", "before")}
        q_split = Signal(name="wr_q_split")
        m.d.sync += [flight["entering"].eq(p_slot), q["lo"].eq(p_beat), q_split.eq(p_split)]
        m.d.sync += [q["hi"].eq(p_beat + p_two), q["before"].eq(p_beat - 1)]
        for k in range(WRITES):
            with m.If(flight["entering"][k]):
                m.d.sync += [flight[f][k].eq(q[f]) for f in q]
                m.d.sync += flight["split"][k].eq(q_split)
        with m.If(take):
            m.d.sync += tail.eq(tail + 1)

        # W beats: a beat as it is, or an unaligned one in two (its words from the offset on
        # in the first bus beat, the rest at the start of the second)
        out = data.View(layout, queue.r_data)
        second = Signal(name="wr_second")
        wdata, wmask = Signal(self.data_bits), Signal(W)
        shifted = Cat(Const(0, self.data_bits), out.data)  # the beat one bus beat up
        smask = Cat(Const(0, W), out.mask)
        with m.Switch(out.off):
            for k in range(W):
                with m.Case(k):
                    if k == 0:
                        m.d.comb += [wdata.eq(out.data), wmask.eq(out.mask)]
                        continue
                    bits = (W - k) * self.word_bits
                    with m.If(second):
                        m.d.comb += [wdata.eq(out.data[bits:]), wmask.eq(out.mask[W - k :])]
                    with m.Else():
                        m.d.comb += [
                            wdata.eq(shifted[bits : bits + self.data_bits]),
                            wmask.eq(smask[W - k : 2 * W - k]),
                        ]
        # the W channel comes from a register, and a second one beside it (a skid buffer): a
        # beat leaves the queue whenever the second is empty, so the queue's read does not wait
        # for `wready` (an AXI input); the first loads the second's beat, or the next one,
        # whenever it is empty or its beat is taken, else the next one waits in the second
        nbytes = self.word_bits // 8
        fields = {"data": self.data_bits, "strb": self.data_bits // 8, "last": 1}
        beat = {"data": wdata, "strb": Cat(b.replicate(nbytes) for b in wmask), "last": ~out.two | second | out.split}
        skid = {k: Signal(width, name=f"w_skid_{k}") for k, width in fields.items()}
        skid_valid = Signal(name="w_skid_valid")
        step = Signal(name="w_step")  # a beat leaves the queue this cycle
        m.d.comb += step.eq(queue.r_rdy & ~skid_valid)
        with m.If(~axi.wvalid | axi.wready):
            with m.If(skid_valid):
                m.d.sync += [axi.wvalid.eq(1), skid_valid.eq(0)]
                m.d.sync += [getattr(axi, f"w{k}").eq(skid[k]) for k in fields]
            with m.Else():
                m.d.sync += axi.wvalid.eq(step)
                m.d.sync += [getattr(axi, f"w{k}").eq(beat[k]) for k in fields]
        with m.Elif(step):
            m.d.sync += [skid_valid.eq(1), *(skid[k].eq(beat[k]) for k in fields)]
        with m.If(step):
            with m.If(~out.two | second):
                m.d.comb += queue.r_en.eq(1)
                m.d.sync += second.eq(0)
            with m.Else():
                m.d.sync += second.eq(1)
