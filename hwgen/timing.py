"""Hardware timing rules, in pure Python (no Amaranth): the one place that both the hardware
templates (hw/) and the cycle model (model.py) take their latencies from, so the model counts
exactly the registers and cycles the hardware has.

Fixed costs of the controllers and transfer units:

    LOAD_EXTRA    a tile load's cycles beyond its beats and the DRAM latency
    STORE_EXTRA   a tile store's cycles beyond its beats and its memory's read latency
    JOIN_EXTRA    a Parallel's cycles beyond its slowest child (its registered done)
    beats_of      DRAM beats that move a tile
    LINK_EXTRA    a link beat's cycles beyond the wire's latency (link_beat_latency); the credit
                  round trip, default FIFO depth and send times of a link (link_round_trip,
                  link_depth, link_send_cycle, link_cycles): hw/link.py

Pipeline timing of a Pipe's datapath: at which stage each expression node is computed.
Scheduling is as-soon-as-possible with chaining: a node is computed in the stage of its latest
operand unless the combinational depth in that stage would exceed `BUDGET`, in which case it
moves one stage later (its operands are registered). A multiplier takes its operands from flip-
flops (an operand made by logic in its stage is carried one stage later), registers them and
then its product (latency 2; 4 when wider than a DSP block); a product by a constant with
several signed digits is a tree of adders, registered after each level, also from flip-flops;
reads of register memories are combinational; a RAM read takes MemPlan.latency cycles.

Depth units: one 32-bit adder is 2, a LUT level (logic, a 2:1 mux) is 1; a stage holds 4
(two adders, or an adder and two levels of logic: about 8 ns on an ECP5). A shift by a
variable amount costs a level per two amount bits its range needs (shift_bits); one that
would fill a stage is split in two, registered between, and takes its operands from
flip-flops (split_shift).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import ir
from .ranges import value_range

LOAD_EXTRA = 5  # a load's cycles beyond its beats and the DRAM latency
STORE_EXTRA = 4  # a store's cycles beyond its beats and its memory's read latency
JOIN_EXTRA = 1  # a Parallel's cycles beyond its slowest child (its registered done)
FANOUT = 4  # lanes that one register of a shared value drives


LINK_EXTRA = 2  # a link beat's cycles beyond the wire's latency: the sender's register, the receiver's FIFO register
LINK_SKID = 4  # registers at a link receiver's output (hw/link.py): a deeper FIFO keeps the rest in a RAM behind them


def link_round_trip(latency: int) -> int:
    """Cycles from a link sender spending a credit to using it again, when the receiver's
    consumer takes each beat as soon as it is shown: the beat's trip (latency + LINK_EXTRA)
    plus the credit's trip back (latency). A receive FIFO of at least this many beats keeps
    the link at one beat per cycle."""
    return 2 * latency + LINK_EXTRA


def link_beat_latency(latency: int) -> int:
    """Cycles from a beat's transfer into a link's sender to the first cycle the receiver
    shows it, when the receiver's FIFO is empty (or holds only beats its consumer takes as
    they come)."""
    return latency + LINK_EXTRA


def link_depth(latency: int) -> int:
    """The default receive FIFO depth of a link: the smallest power of two that covers the
    credit round trip (a power of two fills a block RAM's address range)."""
    need = link_round_trip(latency)
    return 1 << (need - 1).bit_length()


def link_send_cycle(k: int, latency: int, depth: int) -> int:
    """The cycle (after the first beat's) in which beat k enters a link's sender, when the
    sender always has a beat and the receiver's consumer is always ready: one beat per cycle
    when depth >= link_round_trip(latency); else bursts of `depth` beats, one burst per round
    trip (depth beats per link_round_trip(latency) cycles)."""
    return k + (k // depth) * max(0, link_round_trip(latency) - depth)


def link_cycles(beats: int, latency: int, depth: int) -> int:
    """The cycle (after the first beat's transfer into the sender) in which the receiver shows
    the last of `beats` beats, under link_send_cycle's conditions: at full rate
    link_beat_latency(latency) + beats - 1."""
    return link_send_cycle(beats - 1, latency, depth) + link_beat_latency(latency)


def beats_of(shape, words: int) -> int:
    """Number of beats moving a tile of `shape`."""
    rows = 1
    for s in shape[:-1]:
        rows *= s
    return rows * -(-shape[-1] // words) if shape else 1


def lanes_of(shape, words: int) -> int:
    """Words of a beat that carry data when moving a tile of `shape`."""
    return min(words, shape[-1]) if shape else 1


def csd_terms(c: int) -> list:
    """The canonical signed digits of `c` as (positive, shift) pairs, lowest first: no two
    adjacent digits are nonzero, so 3840 = 4096 - 256 has two terms. Negative `c` works too."""
    terms, n, k = [], c, 0
    while n:
        if n & 1:
            d = 2 - (n & 3)  # +1 or -1
            terms.append((d > 0, k))
            n -= d
        n >>= 1
        k += 1
    return terms


def pair_up(terms: list, add) -> list:
    """One level of a balanced adder tree over signed terms (an odd one out passes through)."""
    pairs = [terms[j : j + 2] for j in range(0, len(terms), 2)]
    return [p[0] if len(p) == 1 else add(*p) for p in pairs]


def shift_add_levels(c: int) -> int:
    """Registers in a pipelined product by the constant c (hw/dsp.py): one per level of adders
    over c's signed digits, and one more to negate when every digit is negative after pairing;
    0 for 0 or a power of two (up to sign: a shift, or a shift and a negation that a caller
    registers once)."""
    signs = [p for p, _ in csd_terms(c)]
    if len(signs) <= 1:
        return 0
    levels = 0
    while len(signs) > 1:
        signs = pair_up(signs, lambda x, y: x or y)  # a sum is negative only if both terms are
        levels += 1
    return levels + (0 if signs[0] else 1)


BUDGET = 4

_REGISTERED = {"mul": 1, "floordiv": 1, "mod": 1}  # latency of ops with an output register
DSP_BITS = 18  # a multiplier block's operand width (ECP5 MULT18X18D, iCE40 SB_MAC16 is 16)


def wide_mul(node) -> bool:
    """A product of two variable operands wider than one DSP block: built from 16-bit partial
    products (each made in a DSP block with its operands and product registered, then
    registered again in the fabric, near the adders) and their sum (registered): four cycles."""
    return (
        isinstance(node, ir.Binary)
        and node.op == "mul"
        and node.dtype.bits > DSP_BITS
        and not isinstance(node.a, ir.Const)
        and not isinstance(node.b, ir.Const)
    )


ROM_MIN = 32  # tables of at least this many entries are ROMs (block RAM), read in 2 cycles


def divider_bits(node) -> tuple | None:
    """(quotient bits, divisor bits) of the pipelined divider for a `//` or `%` node, from the
    magnitudes its operands can take; None when the divisor is a constant power of two (a
    shift: one cycle)."""
    if not (isinstance(node, ir.Binary) and node.op in ("floordiv", "mod")):
        return None
    b = node.b
    if isinstance(b, ir.Const) and b.value > 0 and b.value & (b.value - 1) == 0:
        return None

    def magnitude_bits(e):
        lo, hi = value_range(e, {})
        return max(1, max(abs(lo), abs(hi)).bit_length())

    return magnitude_bits(node.a), magnitude_bits(b)


def latency_of(node) -> int:
    """Registers an operation adds after its logic (0 for combinational ones). A multiplier
    registers its operands (they fan out to the DSP blocks of every lane), then its product;
    a wide one registers its partial products once more in the fabric before summing them
    (the route out of a DSP block is long; the adders then start at a flip-flop). A large
    table is a ROM: a synchronous
    read, then an output register. A division is a pipeline of one stage per quotient bit."""
    if isinstance(node, ir.Table):
        return 2 if len(node.values) >= ROM_MIN else 0
    bits = divider_bits(node)
    if bits is not None:  # operands, a quotient bit per stage, remainder fixed, candidates, result
        return bits[0] + 4
    if wide_mul(node):
        return 4
    if multiplier(node):
        return 2
    if shift_add(node):
        return shift_add_levels(constant_factor(node)[1])
    if split_shift(node) is not None:
        return 1
    if isinstance(node, ir.Binary):
        return _REGISTERED.get(node.op, 0)
    return 0


def multiplier(node) -> bool:
    """A product of two variable operands (one or more DSP blocks). Its operands are taken
    from flip-flops: an operand computed by logic in its stage is carried a stage later, so
    the long route into the blocks starts at a register."""
    return isinstance(node, ir.Binary) and node.op == "mul" and constant_factor(node) is None


def constant_factor(node):
    """(the other operand, the constant) of a product by a constant, else None."""
    if not (isinstance(node, ir.Binary) and node.op == "mul"):
        return None
    if isinstance(node.b, ir.Const):
        return node.a, node.b.value
    if isinstance(node.a, ir.Const):
        return node.b, node.a.value
    return None


def shift_add(node) -> bool:
    """A product by a constant with two or more signed digits: shifted copies of the operand
    summed by a tree of adders with a register after each level (dsp.pipelined_product), its
    operand taken from a flip-flop. A product by a power of two is a shift and a register."""
    found = constant_factor(node)
    return found is not None and shift_add_levels(found[1]) > 0


def from_flipflop(node) -> bool:
    """The node's operands are taken from flip-flops (carried a stage when made by logic)."""
    return multiplier(node) or shift_add(node)


def shift_bits(node) -> tuple | None:
    """(amount bits the shifter uses, 1 if the amount can reach the width else 0) of a shift
    by a variable amount, from the amount's range; None for a shift by a constant. A shifter
    is a multiplexer level per amount bit (two per LUT level with the ECP5's wide muxes), and
    an amount that can reach the width needs one more to give 0 or the sign."""
    if not (isinstance(node, ir.Binary) and node.op in ("shl", "shr")) or isinstance(node.b, ir.Const):
        return None
    width = node.a.dtype.bits
    lo, hi = value_range(node.b, {})
    if 0 <= lo and hi < width:
        return max(1, hi.bit_length()), 0
    return max(1, (width - 1).bit_length()), 1


LOW_SHIFT_BITS = 2  # amount bits a split shifter leaves to its second step (one LUT level)


def split_shift(node) -> tuple | None:
    """(logic before, logic after the register) of a shift by a variable amount whose shifter
    would fill a whole stage (a 64-bit shift by up to 63 or more, a 32-bit one that can reach
    32): it shifts by the amount's high bits and registers the result with the low bits and
    the "amount >= width" flag, then shifts by the low bits and selects 0 or the sign in the
    next stage. The amount fans out to every bit's multiplexer and each bit of the shifted
    value to as many multiplexers as the high bits select from; splitting halves the
    multiplexer depth behind those routes, and both operands are taken from flip-flops (one
    made by logic in its stage, such as a split shift's second step, is carried a stage
    later). None for other nodes."""
    bits = shift_bits(node)
    if bits is None or _shifter_cost(bits) < BUDGET:
        return None
    used, can_reach = bits
    return -(-(used - LOW_SHIFT_BITS) // 2), -(-LOW_SHIFT_BITS // 2) + can_reach


def _shifter_cost(bits: tuple) -> int:
    return -(-bits[0] // 2) + bits[1]


def op_cost(node) -> int:
    """Combinational depth added by `node`. A comparison's carry chain is as wide as its
    operands (its result is one bit); an absolute value is a negation and a select."""
    wide = getattr(node, "dtype", None) is not None and node.dtype.bits > 32
    if isinstance(node, ir.Binary) and node.op in ir.COMPARE:
        wide = max(node.a.dtype.bits, node.b.dtype.bits) > 32
    if isinstance(node, ir.Binary):
        if node.op in ("add", "sub") or node.op in ir.COMPARE:
            return 3 if wide else 2
        if node.op in ("max", "min"):
            return 4 if wide else 3
        if node.op in ("shl", "shr"):
            bits = shift_bits(node)
            return 2 if bits is None else _shifter_cost(bits)
        if node.op in ("and", "or", "xor"):
            return 1
        return 0  # registered ops: their cost is their latency
    if isinstance(node, ir.Unary):  # abs: a negation, then a select by the sign
        return {"invert": 0, "neg": 3 if wide else 2, "abs": 4 if wide else 3}[node.op]
    if isinstance(node, ir.Select):
        return 1
    if isinstance(node, ir.Table):
        return 0 if len(node.values) >= ROM_MIN else mux_cost(len(node.values)) + 1
    if isinstance(node, ir.Cast):
        return 1 if node.dtype.is_bool and not node.a.dtype.is_bool else 0
    return 0


def mux_cost(size: int) -> int:
    """Depth of reading one of `size` registers by a computed address."""
    if size <= 1:
        return 0
    if size <= 4:
        return 1
    if size <= 16:
        return 2
    return 3


@dataclass
class Timing:
    """`stage[node]`: the cycle after issue in which `node`'s value is produced;
    `depth[node]`: its combinational depth within that stage. Static nodes (constants,
    parameters, counters of enclosing loops) hold still during the pipe: stage 0, depth 0."""

    stage: dict = field(default_factory=dict)
    depth: dict = field(default_factory=dict)
    far: set = field(default_factory=set)  # products registered once more (schedule's `far`)

    def ready(self, node) -> tuple:
        return self.stage[node], self.depth[node]


def _operands(node) -> tuple:
    if isinstance(node, ir.MemRead):
        return tuple(node.idx)
    return ir.children(node)


def place(timing: Timing, operands, cost: int, latency: int = 0) -> tuple:
    """(stage, depth) of a node with `operands`, combinational `cost` and output `latency`."""
    return place_at([timing.ready(o) for o in operands], cost, latency)


def place_at(ready, cost: int, latency: int = 0, after: int = 0) -> tuple:
    """(stage, depth) of a value computed from inputs ready at `ready` ((stage, depth) pairs):
    `cost` of logic, then `latency` registers, then `after` more logic."""
    s, d = 0, 0
    for os_, od in ready:
        if os_ > s:
            s, d = os_, od
        elif os_ == s:
            d = max(d, od)
    if d + cost > BUDGET and d > 0:
        s, d = s + 1, 0
    d += cost
    if latency:
        s, d = s + latency, after
    return s, d


def read_timing(plan) -> tuple:
    """(latency, logic before, logic after) of a read of the memory planned by `plan`:
    registers read through a multiplexer in the same cycle; RAM returns registered data
    MemPlan.latency cycles after the address (4 to 6: hw/onchip.py)."""
    if plan.latency == 0:
        return 0, mux_cost(plan.mem.size * plan.depth), 0
    return plan.latency, 0, 0


def schedule(exprs, reads, spread=None, spread_index=None, far=None) -> Timing:
    """Schedule every node of `exprs`; `reads(mem)` gives a read's (latency, before, after).
    `spread(node, operand)`: the multiplier `node`'s `operand` goes to many lanes, so it is
    taken two stages after it is made (a register per group of lanes, then per lane).
    `spread_index(read, index)`: the read's `index` goes to the banks of many lanes, so it is
    taken a stage after it is made (a register per group of lanes).
    `far(node)`: the multiplier `node` has so many lanes that their DSP blocks spread across
    the chip, away from the adders and banks the products go to: its product is registered
    once more in the fabric (latency 3), which splits that route in two (`timing.far`)."""
    timing = Timing()

    def visit(node):
        if node in timing.stage:
            return
        for o in _operands(node):
            visit(o)
        if isinstance(node, ir.MemRead):
            lat, before, after = reads(node.mem)
            ready = [
                (s + 1, 0) if spread_index is not None and spread_index(node, i) else (s, d)
                for i, (s, d) in zip(node.idx, map(timing.ready, node.idx))
            ]
            s, d = place_at(ready, before, lat, after)
        elif (split := split_shift(node)) is not None:
            before, after = split
            ready = [(s + 1, 0) if d > 0 else (s, d) for s, d in map(timing.ready, ir.children(node))]
            s, d = place_at(ready, before, 1, after)
        elif latency_of(node):
            ready = [timing.ready(c) for c in ir.children(node)]
            if from_flipflop(node):  # the route to a DSP block is long; adders start the tree
                wide = [spread is not None and multiplier(node) and spread(node, c) for c in ir.children(node)]
                ready = [(s + 2, 0) if far else (s + 1, 0) if d > 0 else (s, d) for (s, d), far in zip(ready, wide)]
            latency = latency_of(node)
            if far is not None and multiplier(node) and not wide_mul(node) and far(node):
                timing.far.add(node)
                latency += 1
            s, d = place_at(ready, 0, latency)
        else:
            s, d = place(timing, _operands(node), op_cost(node))
        timing.stage[node] = s
        timing.depth[node] = d

    for e in exprs:
        visit(e)
    visit = None  # noqa: F841  (a recursive closure is a reference cycle: free what it holds now)
    return timing


def combine_cost(op: ir.Combiner, dtype) -> int:
    """Depth of an accumulator update `first ? v : op(old, v)` within the write stage (it
    must fit one cycle for one update per cycle; a multiplier counts as a whole stage)."""
    if op.expr is None:
        if op.op in _REGISTERED:
            return BUDGET + 1
        probe = ir.Binary(op.op, ir.Param("%a", dtype), ir.Param("%b", dtype), dtype)
        return op_cost(probe) + 1
    total = 1
    for n in ir.walk(op.expr):
        is_slow = isinstance(n, ir.Binary) and n.op in _REGISTERED
        total += BUDGET if is_slow else op_cost(n)
    return total


@dataclass
class WritePlan:
    """Where one write of a pipe happens: `tree` holds (stage, depth) of each level of the
    reduction tree over its lanes; the accumulator update and the write happen in `stage`."""

    tree: list
    stage: int


def write_plan(timing: Timing, w, reduce_lanes: int, read: tuple) -> WritePlan:
    """Plan one loops.Write whose value is combined over `reduce_lanes` lanes by a tree;
    `read`: the (latency, before, after) of reading the accumulator back."""
    ready = timing.ready(w.value)
    tree = []
    lanes = reduce_lanes
    cost = combine_cost(w.op, w.mem.dtype) - 1 if w.op is not None else 0
    while lanes > 1:
        ready = place_at([ready], min(cost, BUDGET))
        tree.append(ready)
        lanes = -(-lanes // 2)
    idx = [timing.ready(i) for i in w.idx]
    if w.op is None:
        stage, _ = place_at([ready] + idx, 0)
        return WritePlan(tree, stage)
    first = [timing.ready(w.first)]
    latency, before, after = read
    # old value (through the read's logic, and a forwarding mux after a RAM) + combine + first
    forward = 2 if latency else 0
    update = min(combine_cost(w.op, w.mem.dtype) + before + after + forward, BUDGET)
    stage, _ = place_at([ready] + idx + first, update)
    if latency:
        idx_stage = max((s for s, _ in idx), default=0)
        stage = max(stage, idx_stage + latency)
    return WritePlan(tree, stage)
