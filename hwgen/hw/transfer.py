"""Tile transfer units: Load (DRAM -> on-chip memory) and Store (on-chip memory -> DRAM).

A tile is a box of the DRAM array: `shape` elements from `origin` (Exprs of the counters of
enclosing loops). Each row of the box (its last axis, contiguous in DRAM) moves in beats of
`words` words; one beat request is made per cycle while the channel accepts them.

Load timing: `go` in t0; beat requests in t0 + 1 onwards (one per cycle when granted); each
response arrives `latency` cycles after its request; `done` pulses the cycle after the last
response. Uncontended: `beats + latency + 1` cycles.
Store timing: write beats in t0 + 1 onwards (one per cycle when granted); `done` pulses the
cycle after the last is accepted. Uncontended: `beats + 1` cycles.

Members: go, done, base: In(addr), ctr_<name>: In, the channel client port (rd_req + rd_resp,
or wr), and memory ports wr_<lane> (Load) or rd_<lane> (Store), one per word lane.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .. import ir
from . import memchannel
from .datapath import build_comb, dtype_shape
from .pipe import _advance, _all_at_end, port_name, used_names
from .regfile import read_port, write_port


def beats_of(shape, words: int) -> int:
    """Number of beats moving a tile of `shape`."""
    rows = 1
    for s in shape[:-1]:
        rows *= s
    return rows * -(-shape[-1] // words) if shape else 1


class _Walker:
    """A row-major walk over a tile's beats: row counters then a beat counter."""

    def __init__(self, shape, words: int, prefix: str):
        from ..loops import Counter

        self.shape = tuple(shape) if shape else (1,)
        self.words = words
        self.beats_per_row = -(-self.shape[-1] // words)
        self.counters = [Counter(f"{prefix}r{k}", n) for k, n in enumerate(self.shape[:-1])]
        self.counters.append(Counter(f"{prefix}b", self.beats_per_row))
        self.regs = {c.name: Signal(range(max(2, c.extent)), name=c.name) for c in self.counters}

    def last(self):
        return _all_at_end(self.counters, self.regs)

    def step(self, m):
        _advance(m, self.counters, self.regs)

    def reset(self, m):
        m.d.sync += [r.eq(0) for r in self.regs.values()]

    def row_values(self):
        return [self.regs[c.name] for c in self.counters[:-1]]

    def beat(self):
        return self.regs[self.counters[-1].name]

    def dram_offset(self, strides):
        """Word offset in DRAM of the current beat from the tile origin."""
        total = self.beat() * self.words
        for value, stride in zip(self.row_values(), strides):
            total = total + value * stride
        return total

    def mem_index(self, lane: int):
        """Flat on-chip index of word `lane` of the current beat, and whether it is in the row."""
        row = 0
        for value, n in zip(self.row_values(), self.shape[:-1]):
            row = row * n + value
        col = self.beat() * self.words + lane
        return row * self.shape[-1] + col, col < self.shape[-1]


def _strides(shape) -> list:
    out, s = [], 1
    for n in reversed(shape):
        out.append(s)
        s *= n
    return list(reversed(out))


class _TileUnit(wiring.Component):
    def __init__(self, origin, dram_shape, tile_shape, outer: dict, words: int, word_bits: int,
                 addr_bits: int, members: dict):
        self._origin = tuple(origin)
        self._dram_shape = tuple(dram_shape)
        self._tile_shape = tuple(tile_shape)
        self._outer = outer
        self._words, self._word_bits, self._addr_bits = words, word_bits, addr_bits
        self.outer_used, _ = used_names(self._origin)
        self.lanes = min(words, self._tile_shape[-1]) if self._tile_shape else 1
        members = {"go": In(1), "done": Out(1), "base": In(addr_bits), **members}
        for n in self.outer_used:
            members[f"ctr_{port_name(n)}"] = In(range(max(2, outer[n])))
        super().__init__(members)

    @property
    def beats(self) -> int:
        return beats_of(self._tile_shape, self._words)

    def origin_address(self, m):
        """base + the tile origin's word offset, as combinational logic."""
        strides = _strides(self._dram_shape)
        leaf = lambda n: getattr(self, f"ctr_{port_name(n.name)}")  # noqa: E731
        total = self.base
        for e, stride in zip(self._origin, strides):
            if isinstance(e, ir.Const) and e.value == 0:
                continue
            v = build_comb(m, e, leaf, self._outer, lambda shape, hint: Signal(shape, name=f"origin_{hint}"))
            total = total + v * stride
        return total


class LoadUnit(_TileUnit):
    """Copies the tile of `load.dram` at `load.origin` into `load.mem` (see module doc)."""

    def __init__(self, load, outer: dict, words: int, word_bits: int, addr_bits: int):
        self.load = load
        mem = load.mem
        lanes = min(words, mem.shape[-1]) if mem.shape else 1
        members = {
            "rd_req": Out(memchannel.read_request(addr_bits)),
            "rd_resp": In(memchannel.read_response(words * word_bits)),
        }
        for k in range(lanes):
            members[f"wr_{k}"] = Out(write_port(mem.size, dtype_shape(mem.dtype)))
        super().__init__(load.origin, load.dram.shape, mem.shape, outer, words, word_bits, addr_bits, members)

    def elaborate(self, platform):
        m = Module()
        strides = _strides(self._dram_shape)
        origin = Signal(self._addr_bits)
        req = _Walker(self._tile_shape, self._words, "q")
        resp = _Walker(self._tile_shape, self._words, "p")
        requesting = Signal()
        receiving = Signal()
        with m.If(self.go):
            m.d.sync += [origin.eq(self.origin_address(m)), requesting.eq(1), receiving.eq(1)]
            req.reset(m)
            resp.reset(m)
        m.d.comb += [
            self.rd_req.valid.eq(requesting),
            self.rd_req.addr.eq(origin + req.dram_offset(strides)),
        ]
        with m.If(requesting & self.rd_req.ready):
            req.step(m)
            with m.If(req.last()):
                m.d.sync += requesting.eq(0)
        m.d.comb += self.rd_resp.ready.eq(1)
        elem_bits = self.load.mem.dtype.bits
        for lane in range(self.lanes):
            port = getattr(self, f"wr_{lane}")
            index, inside = resp.mem_index(lane)
            word = self.rd_resp.data[lane * self._word_bits:lane * self._word_bits + elem_bits]
            m.d.comb += [
                port.en.eq(receiving & self.rd_resp.valid & inside),
                port.addr.eq(index),
                port.data.eq(word),
            ]
        m.d.sync += self.done.eq(0)
        with m.If(receiving & self.rd_resp.valid):
            resp.step(m)
            with m.If(resp.last()):
                m.d.sync += [receiving.eq(0), self.done.eq(1)]
        return m


class StoreUnit(_TileUnit):
    """Copies `store.mem` into the tile of `store.dram` at `store.origin` (see module doc)."""

    def __init__(self, store, outer: dict, words: int, word_bits: int, addr_bits: int):
        self.store = store
        mem = store.mem
        lanes = min(words, store.shape[-1]) if store.shape else 1
        members = {"wr": Out(memchannel.write(addr_bits, words * word_bits, words))}
        for k in range(lanes):
            members[f"rd_{k}"] = Out(read_port(mem.size, dtype_shape(mem.dtype)))
        super().__init__(store.origin, store.dram.shape, store.shape, outer, words, word_bits, addr_bits, members)

    def elaborate(self, platform):
        m = Module()
        strides = _strides(self._dram_shape)
        origin = Signal(self._addr_bits)
        walk = _Walker(self._tile_shape, self._words, "q")
        active = Signal()
        with m.If(self.go):
            m.d.sync += [origin.eq(self.origin_address(m)), active.eq(1)]
            walk.reset(m)
        lanes = []
        mask = []
        for lane in range(self._words):
            if lane < self.lanes:
                port = getattr(self, f"rd_{lane}")
                index, inside = walk.mem_index(lane)
                m.d.comb += port.addr.eq(index)
                word = Signal(self._word_bits, name=f"word_{lane}")
                m.d.comb += word.eq(port.data.as_unsigned())
                lanes.append(word)
                mask.append(inside)
            else:
                lanes.append(Const(0, self._word_bits))
                mask.append(Const(0, 1))
        m.d.comb += [
            self.wr.valid.eq(active),
            self.wr.addr.eq(origin + walk.dram_offset(strides)),
            self.wr.data.eq(Cat(*lanes)),
            self.wr.mask.eq(Cat(*mask)),
        ]
        m.d.sync += self.done.eq(0)
        with m.If(active & self.wr.ready):
            walk.step(m)
            with m.If(walk.last()):
                m.d.sync += [active.eq(0), self.done.eq(1)]
        return m
