"""Tile transfer units: Load (DRAM -> on-chip memory) and Store (on-chip memory -> DRAM).

A tile is a box of the DRAM array: `shape` elements from `origin` (Exprs of the counters of
enclosing loops). Each row of the box (its last axis, contiguous in DRAM) moves in beats of up
to `words` words, one beat request per cycle while the channel accepts them: a burst.

Load timing: `go` in t0; beat requests from t0 + 1 (one per cycle when granted); each response
arrives `latency` cycles after its request and is written to the tile; `done` pulses the cycle
after the last response. Uncontended: `beats + latency + 1` cycles.
Store timing: the tile is read one beat per cycle from t0 + 1 (`read latency` 0 for registers,
1 for block RAM) and sent through a two-entry queue; `done` pulses the cycle after the last
beat is accepted. Uncontended: `beats + read latency + 1` cycles.

Members: go, done, base: In(addr), ctr_<name>: In, the channel client port (rd_req + rd_resp,
or wr), and `port`: the tile memory's vector port, one lane per word of a beat.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .. import ir
from ..loops import Counter
from . import memchannel
from .counters import all_at_end, next_values
from .datapath import build_comb
from .onchip import read_port, write_port
from .pipe import port_name, used_names


def beats_of(shape, words: int) -> int:
    """Number of beats moving a tile of `shape`."""
    rows = 1
    for s in shape[:-1]:
        rows *= s
    return rows * -(-shape[-1] // words) if shape else 1


def lanes_of(shape, words: int) -> int:
    return min(words, shape[-1]) if shape else 1


def static_banks(shape, words: int, plan) -> list | None:
    """Each word lane's bank, when it is the same for every beat."""
    lanes = lanes_of(shape, words)
    if plan.kind != "sram" or any(b > 1 for b in plan.banks[:-1]) or words % plan.banks[-1]:
        return None
    return [tuple([0] * (len(shape) - 1) + [k % plan.banks[-1]]) for k in range(lanes)]


def _strides(shape) -> list:
    out, s = [], 1
    for n in reversed(shape):
        out.append(s)
        s *= n
    return list(reversed(out))


class _Beats:
    """A row-major walk over a tile's beats: one counter per row axis, then the beat in the row."""

    def __init__(self, shape, words: int, prefix: str):
        self.shape = tuple(shape) if shape else (1,)
        self.words = words
        self.counters = [Counter(f"{prefix}r{k}", n) for k, n in enumerate(self.shape[:-1])]
        self.counters.append(Counter(f"{prefix}b", -(-self.shape[-1] // words)))
        self.regs = [Signal(range(max(2, c.extent)), name=c.name) for c in self.counters]
        self.chain = list(zip(self.regs, (c.extent for c in self.counters)))

    def last(self):
        return all_at_end(self.chain)

    def step(self, m):
        m.d.sync += [r.eq(v) for r, v in zip(self.regs, next_values(self.chain))]

    def reset(self, m):
        m.d.sync += [r.eq(0) for r in self.regs]

    def dram_offset(self, strides):
        """Word offset in DRAM of the current beat from the tile origin."""
        total = self.regs[-1] * self.words
        for value, stride in zip(self.regs[:-1], strides):
            total = total + value * stride
        return total

    def lane_index(self, lane: int):
        """The tile index of word `lane` of the current beat, and whether it is in the row."""
        col = self.regs[-1] * self.words + lane
        return list(self.regs[:-1]) + [col], col < self.shape[-1]


class _TileUnit(wiring.Component):
    def __init__(self, origin, dram_shape, tile_shape, outer: dict, words: int, word_bits: int,
                 addr_bits: int, members: dict):
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
        """base + the tile origin's word offset, as combinational logic."""
        leaf = lambda n: getattr(self, f"ctr_{port_name(n.name)}")  # noqa: E731
        total = self.base
        for e, stride in zip(self._origin, _strides(self._dram_shape)):
            if isinstance(e, ir.Const) and e.value == 0:
                continue
            v = build_comb(m, e, leaf, self._outer, lambda shape, hint: Signal(shape, name=f"origin_{hint}"))
            total = total + v * stride
        return total

    def set_index(self, m, port, lane: int, idx) -> None:
        """Drive a lane's memory index; a memory may drop the tile's unit axes (a stored
        accumulator of shape (16,) for a (16, 1) tile, a scalar for a (1,) tile)."""
        if self.mem_shape != self._tile_shape:
            idx = [v for v, n in zip(idx, self._tile_shape) if n > 1]
        for d, v in enumerate(idx or [Const(0, 1)]):
            m.d.comb += getattr(port, f"i{lane}_{d}").eq(v)


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
        origin = Signal(self._addr_bits)
        req = _Beats(self._tile_shape, self._words, "q")
        resp = _Beats(self._tile_shape, self._words, "p")
        requesting, receiving = Signal(), Signal()
        with m.If(self.go):
            m.d.sync += [origin.eq(self.origin_address(m)), requesting.eq(1), receiving.eq(1)]
            req.reset(m)
            resp.reset(m)
        m.d.comb += [self.rd_req.valid.eq(requesting), self.rd_req.addr.eq(origin + req.dram_offset(strides))]
        with m.If(requesting & self.rd_req.ready):
            req.step(m)
            with m.If(req.last()):
                m.d.sync += requesting.eq(0)
        m.d.comb += self.rd_resp.ready.eq(1)
        bits = self.load.mem.dtype.bits
        arriving = receiving & self.rd_resp.valid
        for lane in range(self.lanes):
            idx, inside = resp.lane_index(lane)
            word = self.rd_resp.data[lane * self._word_bits:lane * self._word_bits + bits]
            m.d.comb += [getattr(self.port, f"en{lane}").eq(arriving & inside), getattr(self.port, f"d{lane}").eq(word)]
            self.set_index(m, self.port, lane, idx)
        m.d.sync += self.done.eq(0)
        with m.If(arriving):
            resp.step(m)
            with m.If(resp.last()):
                m.d.sync += [receiving.eq(0), self.done.eq(1)]
        return m


class StoreUnit(_TileUnit):
    """Copies `store.mem` into the tile of `store.dram` at `store.origin` (see module doc).
    `read_latency`: 0 for a register memory, 1 for block RAM."""

    def __init__(self, store, outer: dict, words: int, word_bits: int, addr_bits: int, read_latency: int):
        self.store = store
        self.read_latency = read_latency
        mem = store.mem
        self.mem_shape = mem.shape
        members = {
            "wr": Out(memchannel.write(addr_bits, words * word_bits, words)),
            "port": Out(read_port(mem.shape, mem.dtype, lanes_of(store.shape, words))),
        }
        super().__init__(store.origin, store.dram.shape, store.shape, outer, words, word_bits, addr_bits, members)

    def elaborate(self, platform):
        m = Module()
        strides = _strides(self._dram_shape)
        W, wb = self._words, self._word_bits
        origin = Signal(self._addr_bits)
        walk = _Beats(self._tile_shape, W, "q")
        fetching, sent_all = Signal(), Signal()
        with m.If(self.go):
            m.d.sync += [origin.eq(self.origin_address(m)), fetching.eq(1), sent_all.eq(0)]
            walk.reset(m)
        # fetch: read one beat's words from the tile
        lane_ok = []
        for lane in range(self.lanes):
            idx, inside = walk.lane_index(lane)
            self.set_index(m, self.port, lane, idx)
            lane_ok.append(inside)
        meta_addr = Signal(self._addr_bits)
        meta_mask = Signal(W)
        meta_last = Signal()
        m.d.comb += [
            meta_addr.eq(origin + walk.dram_offset(strides)),
            meta_mask.eq(Cat(*lane_ok, Const(0, W - len(lane_ok)))),
            meta_last.eq(walk.last()),
        ]
        count = Signal(range(3))
        q = [(Signal(self._addr_bits, name=f"q{k}_addr"), Signal(W * wb, name=f"q{k}_data"),
              Signal(W, name=f"q{k}_mask"), Signal(name=f"q{k}_last")) for k in range(2)]
        fetch = Signal()
        # arrival: the fetched beat's data, now or one cycle later
        arr_valid = Signal()
        arr_addr, arr_mask, arr_last = Signal(self._addr_bits), Signal(W), Signal()
        if self.read_latency:
            m.d.sync += [arr_valid.eq(fetch), arr_addr.eq(meta_addr), arr_mask.eq(meta_mask), arr_last.eq(meta_last)]
        else:
            m.d.comb += [arr_valid.eq(fetch), arr_addr.eq(meta_addr), arr_mask.eq(meta_mask), arr_last.eq(meta_last)]
        words = [getattr(self.port, f"d{lane}").as_unsigned() for lane in range(self.lanes)]
        arr_data = Signal(W * wb)
        m.d.comb += arr_data.eq(Cat(*[Cat(w, Const(0, wb - len(w))) for w in words]))
        head = q[0]
        send_valid = (count > 0) | arr_valid
        m.d.comb += [
            self.wr.valid.eq(send_valid),
            self.wr.addr.eq(Mux(count > 0, head[0], arr_addr)),
            self.wr.data.eq(Mux(count > 0, head[1], arr_data)),
            self.wr.mask.eq(Mux(count > 0, head[2], arr_mask)),
        ]
        accepted = send_valid & self.wr.ready
        sent_last = Mux(count > 0, head[3], arr_last)
        pop = accepted & (count > 0)
        push = arr_valid & ~(accepted & (count == 0))
        entry = (arr_addr, arr_data, arr_mask, arr_last)
        # queue update: shift on pop, append the arrival behind what stays
        stay = count - pop
        with m.If(pop):
            m.d.sync += [a.eq(b) for a, b in zip(q[0], q[1])]
        with m.If(push):
            with m.If(stay == 0):
                m.d.sync += [a.eq(b) for a, b in zip(q[0], entry)]
            with m.Else():
                m.d.sync += [a.eq(b) for a, b in zip(q[1], entry)]
        m.d.sync += count.eq(count - pop + push)
        # fetch the next beat while the queue can take it
        room = (count < 2) if not self.read_latency else (count - pop + push < 2)
        m.d.comb += fetch.eq(fetching & room)
        with m.If(fetch):
            walk.step(m)
            with m.If(walk.last()):
                m.d.sync += fetching.eq(0)
        m.d.sync += self.done.eq(0)
        with m.If(accepted & sent_last):
            m.d.sync += self.done.eq(1)
        return m
