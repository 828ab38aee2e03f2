"""Tile transfer units: Load (DRAM -> on-chip memory) and Store (on-chip memory -> DRAM).

A tile is a box of the DRAM array: `shape` elements from `origin` (Exprs of the counters of
enclosing loops). Each row of the box (its last axis, contiguous in DRAM) moves in beats of up
to `words` words, one beat request per cycle while the channel accepts them: a burst.

Both first spend two cycles on the tile's DRAM address (products, then their sum).
Load timing: `go` in t0; beat requests from t0 + 2 (one per cycle when granted; a refused
request waits in a skid register, so the beat counters never see the grant); each response
arrives `latency` + 2 cycles after its request (the arbiter registers the request on its way
out and the response on its way in), is registered again
(so the tile memory's bank multiplexers start from flip-flops) and written to the tile the
cycle after; `done` pulses the cycle after that write. Uncontended: `beats + latency +
timing.LOAD_EXTRA` (5).
Store timing: the tile is read one beat per cycle from t0 + 2 (`read latency` 0 for registers,
4 to 6 for RAM: MemPlan.latency) into a ring of read latency + 2 beats, which sends each beat the cycle after it
arrives; the arbiter's request register takes it and the channel accepts it from there a
cycle later (`wr_sent`); `done` pulses the cycle after the channel accepts the last beat, so a
read requested after `done` sees every write. Uncontended: `beats + read latency +
timing.STORE_EXTRA` (4).

Members: go, done, base: In(addr), ctr_<name>: In, the channel client port (rd_req + rd_resp,
or wr and wr_sent: In(1)), and `port`: the tile memory's vector port, one lane per word of a beat.
"""

from __future__ import annotations

import math

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .. import ir
from ..loops import Counter
from ..passes.memplan import congruent_banks
from ..timing import beats_of, lanes_of
from . import dsp, memchannel
from .counters import all_at_end, next_values
from .datapath import build_comb
from .device import KEEP
from .onchip import lane_data, lane_en, lane_index, one_of, read_port, write_port
from .pipe import port_name, used_names


def reach_banks(shape, words: int, plan) -> list | None:
    """Each word lane's reach (the banks it can address, as in OnChipMem), or None for any.
    Word k of a beat is at column beat * words + k, so along the last dimension's B banks it
    stays in the banks congruent to k modulo gcd(B, words); rows reach every bank."""
    lanes = lanes_of(shape, words)
    if plan.kind != "sram":
        return None
    grains = [1] * (len(plan.banks) - 1) + [math.gcd(plan.banks[-1], words)]
    return [congruent_banks([0] * (len(grains) - 1) + [k % grains[-1]], grains, plan.banks) for k in range(lanes)]


def _strides(shape) -> list:
    out, s = [], 1
    for n in reversed(shape):
        out.append(s)
        s *= n
    return list(reversed(out))


class _Beats:
    """A row-major walk over a tile's beats: one counter per row axis, then the beat in the row."""

    def __init__(self, shape, words: int, prefix: str, attrs=None):
        self.shape = tuple(shape) if shape else (1,)
        self.words = words
        self.counters = [Counter(f"{prefix}r{k}", n) for k, n in enumerate(self.shape[:-1])]
        self.counters.append(Counter(f"{prefix}b", -(-self.shape[-1] // words)))
        self.regs = [Signal(range(max(2, c.extent)), name=c.name, attrs=attrs) for c in self.counters]
        self.chain = list(zip(self.regs, (c.extent for c in self.counters)))

    def last(self):
        return all_at_end(self.chain)

    def step(self, m):
        m.d.sync += [r.eq(v) for r, v in zip(self.regs, next_values(self.chain))]

    def reset(self, m):
        m.d.sync += [r.eq(0) for r in self.regs]

    def dram_address(self, m, start, origin, strides, step, bits: int, late_step=None):
        """A register holding the DRAM address of the current beat: `origin` when `start`,
        then moved on each `step` by a constant that depends only on which counters wrap
        (so no multiplier or adder chain feeds the channel's address). With `late_step`
        (`step` a cycle later) it holds each beat's address a cycle later: the move chosen at
        `step` is registered and added at `late_step`, so the counters reach one register and
        not the adder."""
        addr = Signal(bits, name=f"{self.counters[-1].name}_addr")
        steps = list(strides[: len(self.regs) - 1]) + [self.words]
        extents = [c.extent for c in self.counters]
        delta = None
        # the counter that steps is the outermost one whose inner counters all wrap; build the
        # choice innermost first so that the outermost match is applied last and wins
        for k in reversed(range(len(self.regs))):
            back = sum((extents[j] - 1) * steps[j] for j in range(k + 1, len(self.regs)))
            value = (steps[k] - back) % (1 << bits)
            inner_done = all_at_end(self.chain[k + 1 :])
            delta = value if delta is None else Mux(inner_done, value, delta)
        if late_step is not None:
            move = Signal(bits, name=f"{self.counters[-1].name}_move", reset_less=True)
            with m.If(step):
                m.d.sync += move.eq(delta)
            delta, step = move, late_step
        with m.If(start):
            m.d.sync += addr.eq(origin)
        with m.Elif(step):
            m.d.sync += addr.eq(addr + delta)
        return addr

    def lane_index(self, lane: int):
        """The tile index of word `lane` of the current beat, and whether it is in the row."""
        col = self.regs[-1] * self.words + lane
        return list(self.regs[:-1]) + [col], col < self.shape[-1]


class _TileUnit(wiring.Component):
    def __init__(
        self, origin, dram_shape, tile_shape, outer: dict, words: int, word_bits: int, addr_bits: int, members: dict
    ):
        self._origin = tuple(origin)
        self._dram_shape = tuple(dram_shape)
        self._tile_shape = tuple(tile_shape)
        self._outer = outer
        self._words, self._word_bits, self._addr_bits = words, word_bits, addr_bits
        self.outer_used, _ = used_names(self._origin)
        self.lanes = lanes_of(self._tile_shape, words)
        members = {"go": In(1), "done": Out(1), "base": In(addr_bits), **members}
        for n in self.outer_used:
            members[f"ctr_{port_name(n)}"] = In(range(max(2, outer[n])))
        super().__init__(members)

    @property
    def beats(self) -> int:
        return beats_of(self._tile_shape, self._words)

    def origin_address(self, m):
        """(start, origin): `start` pulses the cycle after `go`; during it `origin` is base +
        the tile origin's word offset. Its products by constants (tile sizes, strides) are shifts
        and adds registered at `go`, and summed in the `start` cycle, so no multiplier block
        sits on the counters' path (a product of two counters would still be a multiplier)."""
        leaf = lambda n: getattr(self, f"ctr_{port_name(n.name)}")  # noqa: E731
        terms = []
        for e, stride in zip(self._origin, _strides(self._dram_shape)):
            if isinstance(e, ir.Const) and e.value == 0:
                continue
            v = build_comb(
                m, e, leaf, self._outer, lambda shape, hint: Signal(shape, name=f"origin_{hint}"), shift_add=True
            )
            term = Signal(self._addr_bits, name=f"origin_term{len(terms)}")
            with m.If(self.go):
                m.d.sync += term.eq(dsp.constant_product(v, stride))
            terms.append(term)
        base = Signal(self._addr_bits, name="origin_base")
        with m.If(self.go):
            m.d.sync += base.eq(self.base)
        start, origin = Signal(name="start"), Signal(self._addr_bits, name="origin")
        m.d.sync += start.eq(self.go)
        total = base
        for t in terms:
            total = total + t
        m.d.comb += origin.eq(total)
        return start, origin

    def set_index(self, m, port, lane: int, idx, domain=None) -> None:
        """Drive a lane's memory index (combinationally, or in `domain`); a memory may drop
        the tile's unit axes (a stored accumulator of shape (16,) for a (16, 1) tile, a
        scalar for a (1,) tile)."""
        if self.mem_shape != self._tile_shape:
            idx = [v for v, n in zip(idx, self._tile_shape) if n > 1]
        domain = m.d.comb if domain is None else domain
        idx = idx or [Const(0, 1)]
        domain += [a.eq(v) for a, v in zip(lane_index(port, lane, len(idx)), idx)]


class LoadUnit(_TileUnit):
    """Copies the tile of `load.dram` at `load.origin` into `load.mem` (see module doc)."""

    def __init__(self, load, outer: dict, words: int, word_bits: int, addr_bits: int):
        self.load = load
        self.mem_shape = load.mem.shape
        mem = load.mem
        members = {
            "rd_req": Out(memchannel.read_request(addr_bits)),
            "rd_resp": In(memchannel.read_response(words * word_bits)),
            "port": Out(write_port(mem.shape, mem.dtype, lanes_of(mem.shape, words))),
        }
        super().__init__(load.origin, load.dram.shape, mem.shape, outer, words, word_bits, addr_bits, members)

    def elaborate(self, platform):
        m = Module()
        strides = _strides(self._dram_shape)
        start, origin = self.origin_address(m)
        req = _Beats(self._tile_shape, self._words, "q")
        resp = _Beats(self._tile_shape, self._words, "p")
        requesting, receiving = Signal(), Signal()
        with m.If(start):
            m.d.sync += [requesting.eq(1), receiving.eq(1)]
            req.reset(m)
            resp.reset(m)
        # a skid register between the request counters and the channel: the counters step
        # whenever it is empty (a flip-flop), and a request the channel refuses waits in it,
        # so the arbiter's grant reaches one flip-flop, not the counters. The channel sees the
        # same requests in the same cycles as without it.
        skid, skid_addr = Signal(name="q_skid"), Signal(self._addr_bits, name="q_skid_addr", reset_less=True)
        step = requesting & ~skid
        address = req.dram_address(m, start, origin, strides, step, self._addr_bits)
        with m.If(~skid):
            m.d.sync += skid_addr.eq(address)
        m.d.sync += skid.eq(Mux(skid, ~self.rd_req.ready, requesting & ~self.rd_req.ready))
        m.d.comb += [self.rd_req.valid.eq(requesting | skid), self.rd_req.addr.eq(Mux(skid, skid_addr, address))]
        with m.If(step):
            req.step(m)
            with m.If(req.last()):
                m.d.sync += requesting.eq(0)
        m.d.comb += self.rd_resp.ready.eq(1)
        bits = self.load.mem.dtype.bits
        arriving = receiving & self.rd_resp.valid
        for lane in range(self.lanes):  # each response is written the cycle after it arrives
            idx, inside = resp.lane_index(lane)
            word = self.rd_resp.data[lane * self._word_bits : lane * self._word_bits + bits]
            m.d.sync += [lane_en(self.port, lane).eq(arriving & inside), lane_data(self.port, lane).eq(word)]
            self.set_index(m, self.port, lane, idx, m.d.sync)
        last_written = Signal()
        m.d.sync += [last_written.eq(0), self.done.eq(last_written)]
        with m.If(arriving):
            resp.step(m)
            with m.If(resp.last()):
                m.d.sync += [receiving.eq(0), last_written.eq(1)]
        return m


class StoreUnit(_TileUnit):
    """Copies `store.mem` into the tile of `store.dram` at `store.origin` (see module doc).
    `read_latency`: 0 for a register memory, 4 to 6 for RAM (MemPlan.latency). `spread`: the
    memory's banks are spread over the chip (more than BANK_FANOUT of them,
    MemPlan.registered_reads); the store then walks its DRAM addresses on a kept copy of its
    beat counters, so the counters that address the banks are not also on the path into the
    DRAM address adder, and makes each beat's address a cycle after its fetch (the copy's
    move registered, then added), as the first in-flight register, so no cycle is added."""

    def __init__(
        self, store, outer: dict, words: int, word_bits: int, addr_bits: int, read_latency: int, spread: bool = False
    ):
        self.store = store
        self.read_latency = read_latency
        self.spread = spread
        mem = store.mem
        self.mem_shape = mem.shape
        members = {
            "wr": Out(memchannel.write(addr_bits, words * word_bits, words)),
            "wr_sent": In(1),
            "port": Out(read_port(mem.shape, mem.dtype, lanes_of(store.shape, words))),
        }
        if store.limit is not None:  # elements from flat position `limit` on are sent as 0
            assert len(store.shape) == 1 and mem.shape == store.shape, "a limited store is a whole 1-D memory"
            members["limit"] = In(64)
        super().__init__(store.origin, store.dram.shape, store.shape, outer, words, word_bits, addr_bits, members)

    def elaborate(self, platform):
        m = Module()
        strides = _strides(self._dram_shape)
        W = self._words
        start, origin = self.origin_address(m)
        # with `spread`, both walks' counters are kept: Yosys would otherwise merge the two copies
        walk = _Beats(self._tile_shape, W, "q", attrs=KEEP if self.spread else None)
        fetching = Signal()
        with m.If(start):
            m.d.sync += fetching.eq(1)
            walk.reset(m)
        # fetch: ask the tile for one beat's words; they arrive L cycles later
        lane_ok = []
        for lane in range(self.lanes):
            idx, inside = walk.lane_index(lane)
            self.set_index(m, self.port, lane, idx)
            lane_ok.append(inside)
        fetch = Signal()
        flight = self._flight(m, walk, start, origin, strides, fetch, lane_ok)
        accepted, out, depth = self._ring(m, flight)
        # fetch while the ring has room for this beat and every beat still on its way: `owed`
        # counts the beats fetched and not yet sent (those in flight plus those in the ring),
        # kept in its own register so that `fetch`, which enables every index register, is
        # one LUT from flip-flops
        owed = Signal(range(depth + 1))
        m.d.sync += owed.eq(owed + fetch - accepted)
        m.d.comb += fetch.eq(fetching & (owed < depth))
        with m.If(fetch):
            walk.step(m)
            with m.If(walk.last()):
                m.d.sync += fetching.eq(0)
        # done once the channel has taken the last beat out of the arbiter's request register
        # (the register holds one beat, so while `last_queued` it is this store's last)
        last_queued = Signal()
        m.d.sync += self.done.eq(0)
        with m.If(accepted & out[3]):
            m.d.sync += last_queued.eq(1)
        with m.If(last_queued & self.wr_sent):
            m.d.sync += [last_queued.eq(0), self.done.eq(1)]
        return m

    def _flight(self, m, walk, start, origin, strides, fetch, lane_ok) -> list:
        """Each fetched beat's (valid, DRAM address, mask, last[, keep]) registered along with
        the tile's read latency: the list of those tuples, stage 0 (combinational) first."""
        W, L = self._words, self.read_latency
        late_addr = None  # with `spread`: the address register that is flight stage 1's address
        if self.spread:  # a kept copy of the counters for the address alone (see the class doc)
            addr_walk = _Beats(self._tile_shape, W, "qa", attrs=KEEP)
            with m.If(start):
                addr_walk.reset(m)
            with m.If(fetch):  # as `walk` below: the same reset and the same steps
                addr_walk.step(m)
            assert L >= 1, "a spread memory is a RAM"
            fetched = Signal(name="qa_fetched", attrs=KEEP)
            m.d.sync += fetched.eq(fetch)
            late_addr = addr_walk.dram_address(m, start, origin, strides, fetch, self._addr_bits, late_step=fetched)
        meta = (
            Signal(name="f_valid"),
            Signal(self._addr_bits, name="f_addr"),
            Signal(W, name="f_mask"),
            Signal(name="f_last"),
        )
        m.d.comb += [
            meta[0].eq(fetch),
            meta[1].eq(0 if self.spread else walk.dram_address(m, start, origin, strides, fetch, self._addr_bits)),
            meta[2].eq(Cat(*lane_ok, Const(0, W - len(lane_ok)))),
            meta[3].eq(walk.last()),
        ]
        if self.store.limit is not None:  # which lanes carry data (not past the limit)
            keep, position = Signal(self.lanes, name="f_keep"), Signal(64, name="position")
            with m.If(start):
                m.d.sync += position.eq(0)
            with m.Elif(fetch):
                m.d.sync += position.eq(position + W)
            m.d.comb += keep.eq(Cat(*[position + lane < self.limit for lane in range(self.lanes)]))
            meta = meta + (keep,)
        flight = [meta]
        for s in range(1, L + 1):
            regs = tuple(Signal.like(x, name=f"f{s}_{x.name[2:]}") for x in meta)
            if s == 1 and late_addr is not None:
                regs = (regs[0], late_addr, *regs[2:])
            m.d.sync += [a.eq(b) for a, b in zip(regs, flight[-1]) if a is not late_addr]
            flight.append(regs)
        return flight

    def _ring(self, m, flight) -> tuple:
        """The ring of read latency + 2 beats between the tile and the channel: each beat
        arriving from the tile goes in, the oldest goes out to `wr`. (accepted, the oldest
        beat's (addr, data, mask, last), depth)."""
        W, wb, L = self._words, self._word_bits, self.read_latency
        arr_valid, arr_addr, arr_mask, arr_last = flight[-1][:4]
        words = [lane_data(self.port, lane) for lane in range(self.lanes)]
        if self.store.limit is not None:
            words = [Mux(flight[-1][4][lane], w, 0) for lane, w in enumerate(words)]
        words = [w.as_unsigned() for w in words]
        arr_data = Signal(W * wb)
        m.d.comb += arr_data.eq(Cat(*[Cat(w, Const(0, wb - len(w))) for w in words]))
        # a ring of L + 2 beats keeps one beat a cycle flowing while the channel may stall;
        # every beat goes through it, so the channel's ready never reaches a queue register
        depth = L + 2
        count = Signal(range(depth + 1))
        # one-hot: the oldest beat; one copy for each data word's output multiplexer and one
        # for addr/mask/last, all rotating together, so no flip-flop drives the whole ring output
        heads = [Signal(depth, init=1, name=f"head{p}", attrs=KEEP) for p in range(W + 1)]
        tail = Signal(depth, init=1)  # one-hot: where the arriving beat goes
        q = [
            (
                Signal(self._addr_bits, name=f"q{k}_addr", reset_less=True),
                Signal(W * wb, name=f"q{k}_data", reset_less=True),
                Signal(W, name=f"q{k}_mask", reset_less=True),
                Signal(name=f"q{k}_last", reset_less=True),
            )
            for k in range(depth)
        ]

        def oldest(field: int, head, bits=slice(None)):
            return one_of([Mux(head[k], q[k][field][bits], 0) for k in range(depth)])

        data = Cat(*[oldest(1, heads[w], slice(w * wb, (w + 1) * wb)) for w in range(W)])
        out = [oldest(0, heads[W]), data, oldest(2, heads[W]), oldest(3, heads[W])]
        send_valid = count != 0
        m.d.comb += [
            self.wr.valid.eq(send_valid),
            self.wr.addr.eq(out[0]),
            self.wr.data.eq(out[1]),
            self.wr.mask.eq(out[2]),
        ]
        accepted = send_valid & self.wr.ready
        # which slot the arriving beat fills; with L >= 1 it is known a cycle early, so each
        # slot has its own enable flip-flops, one for each data word and one for the rest (not
        # one valid flag fanned out to every slot's hundreds of flip-flops)
        filled = Mux(flight[-2][0], Mux(arr_valid, tail.rotate_left(1), tail), 0) if L >= 1 else None
        for k in range(depth):
            pieces = [(q[k][1][w * wb : (w + 1) * wb], arr_data[w * wb : (w + 1) * wb]) for w in range(W)]
            pieces.append((Cat(q[k][0], q[k][2], q[k][3]), Cat(arr_addr, arr_mask, arr_last)))
            for p, (dst, src) in enumerate(pieces):
                en = Signal(name=f"q{k}_en{p}", attrs=KEEP)
                if L >= 1:
                    m.d.sync += en.eq(filled[k])
                else:
                    m.d.comb += en.eq(arr_valid & tail[k])
                with m.If(en):
                    m.d.sync += dst.eq(src)
        with m.If(arr_valid):
            m.d.sync += tail.eq(tail.rotate_left(1))
        with m.If(accepted):
            m.d.sync += [head.eq(head.rotate_left(1)) for head in heads]
        m.d.sync += count.eq(count + arr_valid - accepted)
        return accepted, out, depth
