"""Hardware for scalar expressions: numpy's integer semantics in Amaranth, pipelined.

Every node's hardware value is an Amaranth value holding the node's exact integer value. Its
shape comes from `value_range`: a node whose numpy result cannot wrap (index arithmetic, say)
gets the narrowest shape that holds its range; any other node gets its dtype's full shape, and
assigning the exact (widened) Amaranth result into that shape is numpy's wrap-around. Amaranth
arithmetic, comparison and floor division are exact on mixed signedness, so operands need no
conversion except for `invert` and shift amounts.

`Datapath.at(node, stage)` gives a node's value at a pipeline stage (timing.py decides where
each node is computed); values needed later than they are made are carried in registers.
"""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Const, Mux, Shape, Signal, signed, unsigned
from amaranth.lib.memory import Memory

from .. import ir
from ..ranges import value_range
from ..timing import (
    FANOUT,
    LOW_SHIFT_BITS,
    Timing,
    constant_factor,
    divider_bits,
    latency_of,
    multiplier,
    shift_add,
    shift_bits,
    split_shift,
    wide_mul,
)
from . import divider, dsp
from .device import KEEP


def dtype_shape(dtype) -> Shape:
    return signed(dtype.bits) if dtype.signed else unsigned(dtype.bits)


def select(values: list, index):
    """values[index] as a multiplexer; the table is padded to a power of two so that every
    index value selects something (a complete case, no latch, no lint warning)."""
    width = max(1, (len(values) - 1).bit_length())
    return Array(values + [values[-1]] * ((1 << width) - len(values)))[index]


def range_shape(lo: int, hi: int) -> Shape:
    """The narrowest Amaranth shape holding every integer in [lo, hi]."""
    if lo >= 0:
        return unsigned(max(1, hi.bit_length()))
    return signed(max((-lo - 1).bit_length(), hi.bit_length()) + 1)


class Datapath:
    """Builds the hardware of the expressions of one Pipe into module `m`, for every lane.

    A lane is a tuple of (par counter, lane offset) pairs; a node's value is made once per
    distinct projection of the lane onto the par counters it depends on (`deps(node)`).
    `leaf(node, lane)` gives the value of an Index or Param (`static(node)` says whether it
    holds still during the pipe); `read(node, index_values, stage, lane)` performs a MemRead
    whose indices are valid at `stage` and returns its data, valid `mem_latency(mem)` later.
    """

    def __init__(self, m, timing: Timing, extents: dict, leaf, static, read, mem_latency, deps, name="dp", spread=None):
        self.m = m
        self.timing = timing
        self.extents = extents
        self.leaf = leaf
        self.is_static_leaf = static
        self.read = read
        self.mem_latency = mem_latency
        self.deps = deps
        self.spread = spread
        self.name = name
        self._made: dict = {}
        self._delayed: dict = {}
        self._copies: dict = {}
        self._ranges: dict = {}
        self._static: dict = {}
        self._n = 0

    def shape(self, node) -> Shape:
        return range_shape(*value_range(node, self.extents, self._ranges))

    def static(self, node) -> bool:
        found = self._static.get(node)
        if found is None:
            if isinstance(node, (ir.Index, ir.Param)):
                found = self.is_static_leaf(node)
            elif isinstance(node, ir.Const):
                found = True
            elif isinstance(node, ir.MemRead):
                found = False
            else:
                found = all(self.static(c) for c in ir.children(node))
            self._static[node] = found
        return found

    def signal(self, shape, hint: str) -> Signal:
        self._n += 1
        return Signal(shape, name=f"{self.name}_{hint}{self._n}", reset_less=True)

    def project(self, node, lane: tuple) -> tuple:
        deps = self.deps(node)
        return tuple(sorted((n, v) for n, v in lane if n in deps))

    def at(self, node, stage: int, lane: tuple = (), per_lane: bool = False):
        """`node`'s value at pipeline `stage` (not before the stage it is computed in).

        A value that lanes share and that is carried in registers reaches them through copies
        of its last register: one per group of FANOUT lanes along the last par counter it does
        not depend on (and per lane of any other such counter), marked `keep` so that synthesis
        does not merge them back. The first group uses the ordinary register. One flip-flop
        drives a few nearby lanes, not all of them; no stage is added. `per_lane` (a
        multiplier's operand that timing.schedule carried two stages): the last register
        is copied for each lane, fed by its group's copy a stage earlier."""
        full = lane
        lane = self.project(node, lane)
        value = self.made(node, lane)
        if self.static(node):
            return value
        made, shape = self.timing.stage[node], self.shape(node)
        sharing = [v for n, v in sorted(full) if (n, v) not in lane]
        if per_lane and sharing and stage - made >= 2:
            key = ("lane", node, lane, tuple(sharing), stage)
            found = self._copies.get(key)
            if found is None:
                found = Signal(shape, name=f"{self.name}_l{stage}_{self._n}", attrs=KEEP, reset_less=True)
                self._n += 1
                self.m.d.sync += found.eq(self.at(node, stage - 1, full))
                self._copies[key] = found
            return found
        group = tuple(sharing[:-1]) + (sharing[-1] // FANOUT,) if sharing else ()
        if stage == made or not any(group):
            return self.delay(value, made, stage, (node, lane), shape)
        key = (node, lane, group, stage)
        found = self._copies.get(key)
        if found is None:
            found = Signal(shape, name=f"{self.name}_g{stage}_{self._n}", attrs=KEEP, reset_less=True)
            self._n += 1
            self.m.d.sync += found.eq(self.delay(value, made, stage - 1, (node, lane), shape))
            self._copies[key] = found
        return found

    def delay(self, value, made_stage: int, stage: int, key, shape):
        """`value`, made in `made_stage`, carried in registers to `stage`."""
        if stage == made_stage:
            return value
        assert stage > made_stage, f"{key} needed at stage {stage} before it is made ({made_stage})"
        found = self._delayed.get((key, stage))
        if found is None:
            prev = self.delay(value, made_stage, stage - 1, key, shape)
            found = self.signal(shape, f"d{stage}_")
            self.m.d.sync += found.eq(prev)
            self._delayed[(key, stage)] = found
        return found

    def made(self, node, lane: tuple = ()):
        """The value of `node` (for the projected `lane`) in the stage it is computed in."""
        key = (node, lane)
        found = self._made.get(key)
        if found is None:
            found = self._make(node, lane)
            self._made[key] = found
        return found

    def _latency(self, node) -> int:
        return latency_of(node) + (node in self.timing.far)

    def _make(self, node, lane):
        if isinstance(node, (ir.Index, ir.Param)):
            return self.leaf(node, lane)
        if isinstance(node, ir.Const):
            return Const(node.value, self.shape(node))
        if isinstance(node, ir.MemRead):
            stage = self.timing.stage[node] - self.mem_latency(node.mem)
            idx = [self.at(i, stage, lane) for i in node.idx]
            return self.read(node, idx, stage, lane)
        out = self.signal(self.shape(node), type(node).__name__.lower()[:3] + "_")
        operand_stage = self.timing.stage[node] - self._latency(node)
        spread = self.spread if self.spread is not None and multiplier(node) else (lambda *_: False)
        operands = [self.at(c, operand_stage, lane, spread(node, c)) for c in ir.children(node)]
        if isinstance(node, ir.Table) and self._latency(node):
            return self._rom(node, operands[0], out)
        if shift_add(node):  # the operand from a flip-flop (timing.schedule), then adder levels
            value, c = constant_factor(node)
            dsp.pipelined_product(self.m, operands[ir.children(node).index(value)], c, out, self.signal)
            return out
        if isinstance(node, ir.Binary) and node.op == "mul" and self._latency(node) >= 2:
            if wide_mul(node):
                ranges = [value_range(c, self.extents, self._ranges) for c in ir.children(node)]
                self.m.d.sync += out.eq(self._wide_mul(node, *operands, ranges))
                return out
            # the operands are registered next to this lane's multiplier (DSP input registers)
            if node not in self.timing.far:
                dsp.multiply(self.m, *operands, out, self.signal)
                return out
            product = self.signal(self.shape(node), "pf_")  # then once more in the fabric
            dsp.multiply(self.m, *operands, product, self.signal)
            self.m.d.sync += out.eq(product)
            return out
        if split_shift(node) is not None:
            self.m.d.comb += out.eq(self._split_shift(node, *operands))
            return out
        decided = self._decided(node, operands)
        if decided is not None:  # the operands' ranges settle it: no logic (and no lint warning)
            self.m.d.comb += out.eq(decided)
            return out
        bits = divider_bits(node)
        if bits is not None:
            divider.build(self.m, node.op, *operands, out, bits, self.signal)
            return out
        value = compute(node, operands)
        if self._latency(node):
            self.m.d.sync += out.eq(value)
        else:
            self.m.d.comb += out.eq(value)
        return out

    def _split_shift(self, node, a, amount):
        """numpy's shift in two steps (timing.split_shift): by the amount's high bits, registered
        with the low bits and the "amount >= width" flag; then by the low bits, and 0 or the
        sign when the amount reaches the width (the sign of the partial result is a's)."""
        used, can_reach = shift_bits(node)
        amt = _fit(amount, node.dtype).as_unsigned()
        left = node.op == "shl"
        high = Cat(Const(0, LOW_SHIFT_BITS), amt[LOW_SHIFT_BITS:used])
        first = _fit(a << high, node.dtype) if left else a >> high
        part = self.signal(first.shape(), "shh_")
        low = self.signal(unsigned(LOW_SHIFT_BITS), "shlo_")
        self.m.d.sync += [part.eq(first), low.eq(amt[:LOW_SHIFT_BITS])]
        second = _fit(part << low, node.dtype) if left else part >> low
        if not can_reach:
            return second
        over = self.signal(unsigned(1), "shov_")
        self.m.d.sync += over.eq(amt >= node.dtype.bits)
        return Mux(over, _fill(node.op, part, node.dtype), second)

    def _decided(self, node, operands):
        """The value of a comparison, max or min that its operands' ranges decide, else None."""
        if not isinstance(node, ir.Binary) or not (node.op in ir.COMPARE or node.op in ("max", "min")):
            return None
        (alo, ahi), (blo, bhi) = (value_range(c, self.extents, self._ranges) for c in (node.a, node.b))
        a, b = operands
        if node.op in ("max", "min"):
            if ahi <= blo:
                return b if node.op == "max" else a
            if bhi <= alo:
                return a if node.op == "max" else b
            return None
        outcome = {
            "lt": True if ahi < blo else False if alo >= bhi else None,
            "le": True if ahi <= blo else False if alo > bhi else None,
            "gt": True if alo > bhi else False if ahi <= blo else None,
            "ge": True if alo >= bhi else False if ahi < blo else None,
            "eq": False if ahi < blo or bhi < alo else True if alo == ahi == blo == bhi else None,
        }
        outcome["ne"] = None if outcome["eq"] is None else not outcome["eq"]
        found = outcome[node.op]
        return None if found is None else Const(int(found), 1)

    def _rom(self, node, index, out):
        """A table as a ROM: read synchronously, then registered (two cycles)."""
        shape = range_shape(min(node.values), max(node.values))
        rom = Memory(shape=shape, depth=len(node.values), init=list(node.values))
        self._n += 1
        self.m.submodules[f"{self.name}_rom{self._n}"] = rom
        port = rom.read_port(transparent_for=())
        self.m.d.comb += [port.addr.eq(index), port.en.eq(1)]
        self.m.d.sync += out.eq(port.data)
        return out

    def _wide_mul(self, node, a, b, ranges):
        """The low bits of a * b from partial products of 16-bit chunks, one DSP block each
        (hw/dsp.py: operands and product registered in the block), each registered once more
        in the fabric, then summed as a balanced tree in the fourth cycle.
        Each operand is cut into the chunks of its two's-complement value as its range needs:
        the lower chunks unsigned, the top one signed when the operand can be negative, so an
        int32 operand takes two chunks even in an int64 product."""
        width = node.dtype.bits
        (alo, ahi), (blo, bhi) = ranges
        if alo >= 0 and blo >= 0:
            width = min(width, ahi.bit_length() + bhi.bit_length())
        chunks_a, chunks_b = (
            _chunks(_fit(a, node.dtype), alo, ahi, width),
            _chunks(_fit(b, node.dtype), blo, bhi, width),
        )
        terms = []
        for i, ca in enumerate(chunks_a):
            for j, cb in enumerate(chunks_b):
                shift = 16 * (i + j)
                if shift >= width:
                    continue
                keep = width - shift
                shape = signed(keep) if ca.shape().signed or cb.shape().signed else unsigned(keep)
                part = self.signal(shape, f"pp{i}{j}_")
                dsp.multiply(self.m, ca, cb, part, self.signal)
                near = self.signal(shape, f"ppr{i}{j}_")  # the fabric register by the adders
                self.m.d.sync += near.eq(part)
                terms.append(near.as_unsigned() if shift == 0 else Cat(Const(0, shift), near))
        if not terms:
            return Const(0, 1)
        while len(terms) > 1:  # a balanced tree: log2(terms) adders deep
            terms = [terms[n] + terms[n + 1] if n + 1 < len(terms) else terms[n] for n in range(0, len(terms), 2)]
        return terms[0][:width]

    def combine(self, op: ir.Combiner, old, new, dtype):
        """`op(old, new)` as combinational logic (an accumulator update, a tree node)."""
        return combine(self.m, op, old, new, dtype, self.signal)


def combine(m, op: ir.Combiner, old, new, dtype, new_signal):
    """`op(old, new)` as combinational logic in `m`."""
    a, b = ir.Param("%a", dtype), ir.Param("%b", dtype)
    expr = ir.Binary(op.op, a, b, dtype) if op.expr is None else op.expr
    return build_comb(m, expr, lambda n: {"%a": old, "%b": new}[n.name], {}, new_signal)


def build_comb(m, expr, leaf, extents: dict, new_signal, shift_add: bool = False):
    """`expr` as combinational logic in `m`. `leaf(node)` gives Index and Param values;
    `new_signal(shape, hint)` makes a named Signal. With `shift_add`, products by a constant
    are shifts and adds (dsp.constant_product) rather than multipliers."""
    memo: dict = {}
    ranges: dict = {}

    def go(n):
        found = memo.get(n)
        if found is not None:
            return found
        if isinstance(n, (ir.Param, ir.Index)):
            out = leaf(n)
        elif isinstance(n, ir.Const):
            out = Const(n.value, range_shape(n.value, n.value))
        else:
            out = new_signal(range_shape(*value_range(n, extents, ranges)), "c_")
            const = constant_factor(n) if shift_add else None
            if const is not None:
                m.d.comb += out.eq(dsp.constant_product(go(const[0]), const[1]))
            else:
                m.d.comb += out.eq(compute(n, [go(c) for c in ir.children(n)]))
        memo[n] = out
        return out

    return go(expr)


def compute(node, operands: list):
    """The exact Amaranth value of `node` given its operands' values (in child order)."""
    dt = node.dtype
    if isinstance(node, ir.Cast):
        (a,) = operands
        return a != 0 if dt.is_bool and not node.a.dtype.is_bool else a
    if isinstance(node, ir.Select):
        c, a, b = operands
        return Mux(c, a, b)
    if isinstance(node, ir.Table):
        (index,) = operands
        shape = range_shape(min(node.values), max(node.values))
        return select([Const(v, shape) for v in node.values], index)
    if isinstance(node, ir.Unary):
        (a,) = operands
        if node.op == "neg":
            return -a
        if node.op == "abs":
            return Mux(a < 0, -a, a) if a.shape().signed else a
        return ~a if dt.is_bool else ~_fit(a, dt)
    return _binary(node, *operands)


_ARITH = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "floordiv": lambda a, b: a // b,
    "mod": lambda a, b: a % b,
    "max": lambda a, b: Mux(a >= b, a, b),
    "min": lambda a, b: Mux(a <= b, a, b),
    "eq": lambda a, b: a == b,
    "ne": lambda a, b: a != b,
    "lt": lambda a, b: a < b,
    "le": lambda a, b: a <= b,
    "gt": lambda a, b: a > b,
    "ge": lambda a, b: a >= b,
}


def _binary(node, a, b):
    """The exact Amaranth value of a Binary node with operand values a and b."""
    dt, name = node.dtype, node.op
    if name in ("and", "or", "xor"):
        if not dt.is_bool:
            a, b = _fit(a, dt), _fit(b, dt)
        return {"and": a & b, "or": a | b, "xor": a ^ b}[name]
    if name in ("shl", "shr"):
        return _shift(name, a, b, node.a.dtype, shift_bits(node))
    return _ARITH[name](a, b)


def _fit(value, dtype):
    """`value` (exact, within dtype's range) as a value of exactly dtype's shape."""
    shape = dtype_shape(dtype)
    width = shape.width
    bits = value[:width] if len(value) >= width else _extend(value, width)
    return bits.as_signed() if shape.signed else bits.as_unsigned()


def _chunks(value, lo: int, hi: int, width: int) -> list:
    """`value` (in [lo, hi], wrapped to `width` bits) as 16-bit chunks from the lowest: all
    unsigned, but the top one signed when the value can be negative."""
    if lo >= 0:
        bits = max(1, hi.bit_length())
    else:
        bits = max((-lo - 1).bit_length(), hi.bit_length()) + 1
    bits = min(bits, width)
    out = []
    for base in range(0, bits, 16):
        top = min(base + 16, bits)
        chunk = value[base:top]
        out.append(chunk.as_signed() if lo < 0 and top == bits else chunk.as_unsigned())
    return out


def _extend(value, width):
    """Sign- or zero-extend `value` to `width` bits (by its own signedness)."""
    if value.shape().signed:
        return Cat(value, value[-1].replicate(width - len(value)))
    return Cat(value, Const(0, width - len(value)))


def _shift(name: str, a, amount, dtype, bits):
    """numpy's shift: the amount's bits as unsigned; >= the width gives 0 (or the sign).
    `bits`: timing.shift_bits (None for a constant amount): the shifter uses only the amount
    bits its range needs, and tests for a shift by the width or more only if it can happen."""
    width = dtype.bits
    amt = _fit(amount, dtype).as_unsigned()
    used, can_reach = (max(1, (width - 1).bit_length()), 1) if bits is None else bits
    shifted = _fit(a << amt[:used], dtype) if name == "shl" else a >> amt[:used]
    if not can_reach:
        return shifted
    return Mux(amt >= width, _fill(name, a, dtype), shifted)


def _fill(name: str, a, dtype):
    """What a shift of `a` by the width or more gives: the sign for an arithmetic shift
    right, else 0."""
    return Mux(a < 0, -1, 0) if name == "shr" and dtype.signed and a.shape().signed else 0


def flat_address(idx, shape):  # used by the register-file template
    """Row-major flat address of index values `idx` into an array of `shape`."""
    addr = None
    stride = 1
    for value, n in reversed(list(zip(idx, shape))):
        term = value if stride == 1 else value * stride
        addr = term if addr is None else addr + term
        stride *= n
    return addr
