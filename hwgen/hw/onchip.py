"""On-chip memory: registers or banked block RAM, optionally N-buffered, with vector ports.

A port serves `lanes` accesses per cycle; each lane gives one index per dimension.

    read port  (user side)  index: Out      index.l<l>.d<k>: lane l's index along dimension k
                            data: In        data.l<l>: lane l's word, the same cycle (registers)
                                            or four cycles later (RAM: address register, read,
                                            output register, bank multiplexer register; five
                                            for more than MUX_GROUP banks, whose
                                            multiplexer has two registered steps; six for
                                            more than BANK_FANOUT banks, which register each
                                            lane's address first: MemPlan.latency)
    write port (user side)  en, index, data: Out   en[l]: mem[index.l<l>] <= data.l<l> at the
                                            clock edge (registers) or the edge after (RAM:
                                            each bank's write is registered; two edges
                                            after for a RAM of more than MUX_GROUP banks
                                            that only tile loads write: each lane's request
                                            is registered, a copy per group of MUX_GROUP
                                            banks it reaches, before the banks' multiplexers;
                                            MemPlan.write_latency)

On the memory: `r<k>` / `w<k>` are the ports, `r<k>_buf` / `w<k>_buf` pick the buffer (when
N-buffered; a RAM of more than BANK_FANOUT banks samples them a cycle late, through copies
per group of lanes, so a new buffer must be selected at least a cycle before the port's first
access to it: the metapipeline selects it with its stage's `go`, and every unit's first access
comes a cycle or more after its `go`); block RAM is split into banks, element idx living in bank (idx[d] % banks[d])_d
at offset (idx[d] // banks[d])_d, the buffers of a bank stacked in one RAM; each bank has one
read port per vector read port, fed by the lane that addresses it. A port may give, per lane,
its reach: the banks the lane can ever address (the word lanes of a tile transfer, a par lane
with an affine subscript). A lane's multiplexers and each bank's request logic then cover
only the lanes and banks that can meet; a lane that reaches one bank is a plain wire. The
planner guarantees that no two lanes of a port need one bank in a cycle; two write ports
never write one buffer in the same cycle.
"""

from __future__ import annotations

import itertools
from types import SimpleNamespace

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from ..passes.memplan import BANK_FANOUT, MUX_GROUP
from ..timing import FANOUT
from .bram import BlockRam
from .datapath import dtype_shape, select
from .device import KEEP


def index_shapes(shape) -> list:
    return [range(max(2, n)) for n in shape] if shape else [range(2)]


def index_layout(shape) -> data.StructLayout:
    """One lane's index: field d<k> along dimension k."""
    return data.StructLayout({f"d{d}": s for d, s in enumerate(index_shapes(shape))})


def _lanes(shape, lanes: int) -> data.StructLayout:
    """A field l<k> of `shape` per lane k (a struct, not an array: Verilog names such as
    r0__data.l3 carry no brackets, which Yosys's ABC9 would read as bit indices)."""
    return data.StructLayout({f"l{k}": shape for k in range(lanes)})


def read_port(shape, dtype, lanes: int) -> wiring.Signature:
    """`index`: Out, lane l's index (`index.l<l>.d<k>`); `data`: In, lane l's word (`data.l<l>`)."""
    return wiring.Signature(
        {
            "index": Out(_lanes(index_layout(shape), lanes)),
            "data": In(_lanes(dtype_shape(dtype), lanes)),
        }
    )


def write_port(shape, dtype, lanes: int) -> wiring.Signature:
    """`en`: Out, a bit per lane; `index` and `data`: Out, as a read port's."""
    return wiring.Signature(
        {
            "en": Out(lanes),
            "index": Out(_lanes(index_layout(shape), lanes)),
            "data": Out(_lanes(dtype_shape(dtype), lanes)),
        }
    )


def lane_index(port, lane: int, ndim: int) -> list:
    """Lane `lane`'s index signals of a read or write port, one per dimension."""
    return [port.index[f"l{lane}"][f"d{d}"] for d in range(max(1, ndim))]


def lane_data(port, lane: int):
    """Lane `lane`'s data of a read or write port."""
    return port.data[f"l{lane}"]


def lane_en(port, lane: int):
    """Lane `lane`'s write enable."""
    return port.en[lane]


def one_of(values: list):
    """The OR of `values`, of which at most one is non-zero (0 for none)."""
    out = None
    for v in values:
        out = v if out is None else out | v
    return 0 if out is None else out


class OnChipMem(wiring.Component):
    """Memory for one passes.memplan.MemPlan. `reads` / `writes`: one entry per port, the
    number of lanes and each lane's reach (a tuple of the bank tuples it can address), or
    None for lanes that can address any bank."""

    def __init__(self, plan, reads: list, writes: list):
        self.plan = plan
        self._reads, self._writes = reads, writes
        mem = plan.mem
        members = {}
        for k, (lanes, _) in enumerate(reads):
            members[f"r{k}"] = In(read_port(mem.shape, mem.dtype, lanes))
            if plan.depth > 1:
                members[f"r{k}_buf"] = In(range(plan.depth))
        for k, (lanes, _) in enumerate(writes):
            members[f"w{k}"] = In(write_port(mem.shape, mem.dtype, lanes))
            if plan.depth > 1:
                members[f"w{k}_buf"] = In(range(plan.depth))
        super().__init__(members)

    def _buf(self, m, name):
        return getattr(self, f"{name}_buf") if self.plan.depth > 1 else 0

    def _lane_bufs(self, m, name, lanes: int, banks: int) -> list:
        """Each lane's buffer select. A RAM of more than BANK_FANOUT banks takes it through a
        register, one copy (kept) per group of FANOUT lanes, so that no flip-flop drives every
        bank's address: such a memory samples `<port>_buf` a cycle late (module docstring)."""
        buf = self._buf(m, name)
        if self.plan.depth <= 1 or banks <= BANK_FANOUT:
            return [buf] * lanes
        copies = []
        for group in range(-(-lanes // FANOUT)):
            copy = Signal.like(buf, name=f"{name}_buf_g{group}", attrs=KEEP, reset_less=True)
            m.d.sync += copy.eq(buf)
            copies.append(copy)
        return [copies[lane // FANOUT] for lane in range(lanes)]

    def elaborate(self, platform):
        m = Module()
        if self.plan.kind == "regs":
            self._registers(m)
        else:
            self._banks(m)
        return m

    # ------------------------------------------------------------------ registers

    def _registers(self, m):
        plan = self.plan
        mem = plan.mem
        shape = mem.shape
        size = max(1, mem.size)
        copies = [
            [Signal(dtype_shape(mem.dtype), name=f"b{c}_r{e}", reset_less=True) for e in range(size)]
            for c in range(plan.depth)
        ]
        width = max(1, (size - 1).bit_length())
        count = [0]

        def flat(port, lane):
            idx = lane_index(port, lane, len(shape))
            addr, stride = 0, 1
            for value, n in reversed(list(zip(idx, shape))):
                addr = addr + (value if stride == 1 else value * stride)
                stride *= n
            count[0] += 1
            sig = Signal(width, name=f"addr{count[0]}")
            m.d.comb += sig.eq(addr)
            return sig

        for k, (lanes, _) in enumerate(self._reads):
            port = getattr(self, f"r{k}")
            buf = self._buf(m, f"r{k}")
            for lane in range(lanes):
                addr = flat(port, lane)
                per_copy = [c[0] if size == 1 else select(c, addr) for c in copies]
                value = per_copy[0] if plan.depth == 1 else select(per_copy, buf)
                m.d.comb += lane_data(port, lane).eq(value)
        for k, (lanes, _) in enumerate(self._writes):
            port = getattr(self, f"w{k}")
            buf = self._buf(m, f"w{k}")
            for lane in range(lanes):
                en = lane_en(port, lane)
                data = lane_data(port, lane)
                addr = flat(port, lane)
                for c in range(plan.depth):
                    hit = en if plan.depth == 1 else en & (buf == c)
                    for e in range(size):
                        with m.If(hit if size == 1 else hit & (addr == e)):
                            m.d.sync += copies[c][e].eq(data)

    # ------------------------------------------------------------------ block RAM banks

    @staticmethod
    def _register(m, value, name, attrs=None):
        reg = Signal.like(value, name=name, reset_less=True, **({"attrs": attrs} if attrs else {}))
        m.d.sync += reg.eq(value)
        return reg

    def _two_step_select(self, m, values, sel, name):
        """values[sel], a cycle later than a plain select: each group of MUX_GROUP values
        picks by the low bits of `sel` into a register, then the group by the high bits
        (themselves carried a cycle). `sel` is a register's input: each group gets its own
        copy of that register (kept apart in synthesis), placed by its banks, so no one
        flip-flop drives multiplexers all over the chip."""
        low = MUX_GROUP.bit_length() - 1
        groups = [values[g : g + MUX_GROUP] for g in range(0, len(values), MUX_GROUP)]
        picked = []
        for n, group in enumerate(groups):
            own = Signal(len(sel), name=f"{name}_sel_g{n}", attrs=KEEP, reset_less=True)
            m.d.sync += own.eq(sel)
            picked.append(self._register(m, select(group, own[:low]), f"{name}_g{n}"))
        sel = self._register(m, sel, f"{name}_sel")
        high = Signal(max(1, len(sel) - low), name=f"{name}_bank_hi", reset_less=True)
        m.d.sync += high.eq(sel[low:])
        return select(picked, high)

    def _banks(self, m):
        g = self._geometry()
        self._write_banks(m, g)
        for k, (lanes, reach) in enumerate(self._reads):  # per vector port, each bank reads for its lane
            self._read_banks(m, g, k, lanes, reach)
        for ram in g.rams.values():
            ram.elaborate_into(m)

    def _geometry(self) -> SimpleNamespace:
        """The banks' layout: bank numbers (`bank_ids`, `flat_bank`), bits of each dimension's
        bank number (`bits`), each dimension's share of a bank padded to a power of two
        (`inner`, so an address is the concatenation of the indices' high bits: no
        multipliers), a bank's `depth` per buffer, and one RAM per bank (`rams`; the N
        buffers of a bank sit one above the other in it)."""
        plan = self.plan
        mem = plan.mem
        shape, banks = mem.shape, plan.banks
        inner = [1 << max(0, (-(-n // b) - 1).bit_length()) for n, b in zip(shape, banks)]
        depth = 1
        for n in inner:
            depth *= n
        bank_ids = list(itertools.product(*(range(b) for b in banks)))
        rams = {
            b: BlockRam(dtype_shape(mem.dtype), depth * plan.depth, len(self._reads), "ram_" + "_".join(map(str, b)))
            for b in bank_ids
        }
        return SimpleNamespace(
            bits=[b.bit_length() - 1 for b in banks],
            inner=inner,
            depth=depth,
            bank_ids=bank_ids,
            flat_bank={b: k for k, b in enumerate(bank_ids)},
            rams=rams,
            count=0,
        )

    def _split(self, m, g, port, lane, buf) -> tuple:
        """(bank number, address in the bank) signals of a lane's index."""
        plan = self.plan
        idx = lane_index(port, lane, len(plan.mem.shape))
        number, offset, stride = 0, 0, 1
        for value, b, w in zip(idx, plan.banks, g.bits):
            number = number * b + (value[:w] if w else 0)
        for value, w, n in reversed(list(zip(idx, g.bits, g.inner))):
            part = value >> w if w else value
            offset = offset | (part << (stride.bit_length() - 1))
            stride *= n
        if plan.depth > 1:
            offset = offset | (buf << (g.depth.bit_length() - 1))
        g.count += 1
        bank_sig = Signal(range(max(2, len(g.bank_ids))), name=f"bank{g.count}")
        addr_sig = Signal(range(max(2, g.depth * plan.depth)), name=f"addr{g.count}")
        m.d.comb += [bank_sig.eq(number), addr_sig.eq(offset)]
        return bank_sig, addr_sig

    def _write_banks(self, m, g) -> None:
        """Writes: each lane's request goes to the bank it addresses. At most one request
        reaches a bank in a cycle (the planner lets one stage at a time write a memory,
        passes.memplan._buffering, and gives a port's lanes distinct banks), so each bank
        ORs its requests, each gated by its hit: an AND-OR multiplexer, shallower than a
        chain of priority multiplexers."""
        plan, bank_ids, flat_bank = self.plan, g.bank_ids, g.flat_bank
        requests = {b: [] for b in g.rams}
        for k, (lanes, reach) in enumerate(self._writes):
            reach = [bank_ids] * lanes if reach is None else reach
            port = getattr(self, f"w{k}")
            bufs = self._lane_bufs(m, f"w{k}", lanes, len(bank_ids))
            for lane in range(lanes):
                bank, addr = self._split(m, g, port, lane, bufs[lane])
                en = lane_en(port, lane)
                data = lane_data(port, lane).as_unsigned()
                step = MUX_GROUP if plan.registered_writes else len(reach[lane])
                for first in range(0, len(reach[lane]), step):
                    group = reach[lane][first : first + step]
                    # the lane's request first lands on flip-flops: a copy (kept) per group of
                    # MUX_GROUP banks, placed by its banks, so no flip-flop's route spans them all
                    g_addr, g_data = (
                        (
                            self._register(m, addr, f"w{k}_l{lane}_addr_g{first // step}", KEEP),
                            self._register(m, data, f"w{k}_l{lane}_data_g{first // step}", KEEP),
                        )
                        if plan.registered_writes
                        else (addr, data)
                    )
                    for b in group:
                        hit = en if len(reach[lane]) == 1 else en & (bank == flat_bank[b])
                        if plan.registered_writes:
                            hit = self._register(m, hit, f"w{k}_l{lane}_hit{flat_bank[b]}")
                        requests[b].append((hit, g_addr, g_data))
        for b, ram in g.rams.items():  # registered: the route into the RAM starts from a flip-flop
            if not requests[b]:
                continue
            if len(requests[b]) == 1:  # one writer: its address and data need no gating
                hit, addr, data = requests[b][0]
                m.d.sync += [ram.w_en.eq(hit), ram.w_addr.eq(addr), ram.w_data.eq(data)]
                continue
            m.d.sync += [
                ram.w_en.eq(one_of([hit for hit, _, _ in requests[b]])),
                ram.w_addr.eq(one_of([Mux(hit, addr, 0) for hit, addr, _ in requests[b]])),
                ram.w_data.eq(one_of([Mux(hit, data, 0) for hit, _, data in requests[b]])),
            ]

    def _read_banks(self, m, g, k, lanes, reach) -> None:
        """Read port k: each bank's address from the lane that addresses it, each lane's data
        from its banks."""
        plan, bank_ids, flat_bank = self.plan, g.bank_ids, g.flat_bank
        reach = [bank_ids] * lanes if reach is None else reach
        port = getattr(self, f"r{k}")
        bufs = self._lane_bufs(m, f"r{k}", lanes, len(bank_ids))
        splits = [self._split(m, g, port, lane, bufs[lane]) for lane in range(lanes)]
        if plan.registered_reads:  # each lane's own registers, then its banks' (MemPlan)
            users_of = {b: sum(b in reach[lane] for lane in range(lanes)) for b in bank_ids}
            # a lane needs its bank number only to pick among banks or to claim a shared one
            picks = [len(reach[lane]) > 1 or users_of[reach[lane][0]] > 1 for lane in range(lanes)]
            splits = [
                (
                    self._register(m, bank, f"r{k}_l{lane}_bank", KEEP) if picks[lane] else bank,
                    self._register(m, addr, f"r{k}_l{lane}_addr", KEEP),
                )
                for lane, (bank, addr) in enumerate(splits)
            ]
        data = {}
        for b, ram in g.rams.items():
            raddr = ram.r_addr[k]
            users = [lane for lane in range(lanes) if b in reach[lane]]
            # the bank's address is registered: the route into the RAM starts from a flip-flop
            if len(users) == 1:  # one lane can address the bank: its address, ungated
                m.d.sync += raddr.eq(splits[users[0]][1])
            elif users:  # the planner gives a bank to at most one lane of a port
                m.d.sync += raddr.eq(
                    one_of([Mux(splits[lane][0] == flat_bank[b], splits[lane][1], 0) for lane in users])
                )
            data[b] = ram.r_data[k]  # three cycles after the bank's address register is given its address
        for lane in range(lanes):
            value = self._lane_data(m, g, k, lane, reach[lane], splits[lane][0], data)
            m.d.sync += lane_data(port, lane).eq(value)  # the data leave on a flip-flop

    def _lane_data(self, m, g, k, lane, banks_l, sel, data):
        """A read lane's data: from its one bank, or chosen among its banks by the bank number
        carried along with its read."""
        plan = self.plan
        if len(banks_l) == 1:
            value = data[banks_l[0]]
            if plan.two_steps:  # the same latency as the multiplexed lanes
                value = self._register(m, value, f"r{k}_l{lane}_q")
            return value
        if len(banks_l) < len(g.bank_ids):
            position = Signal(range(len(banks_l)), name=f"r{k}_l{lane}_pick")
            m.d.comb += position.eq(one_of([Mux(sel == g.flat_bank[b], n, 0) for n, b in enumerate(banks_l)]))
            sel = position
        for step in range(2 if plan.two_steps else 3):  # the third in _two_step_select
            nxt = Signal(range(max(2, len(banks_l))), name=f"r{k}_l{lane}_bank{step}", reset_less=True)
            m.d.sync += nxt.eq(sel)
            sel = nxt
        values = [data[b] for b in banks_l]
        if plan.two_steps:
            return self._two_step_select(m, values, sel, f"r{k}_l{lane}")
        return select(values, sel)
