"""The resource model: LUTs, flip-flops, block RAMs and DSP blocks a compiled kernel will take
on a device, predicted from the compile pipeline's plans (passes.Compiled), without building
any hardware, in milliseconds.

    estimate(compiled, target="ecp5") -> {"luts": .., "ffs": .., "brams": .., "dsps": ..}
    features(compiled, target)        -> the counts the estimate is made from (below)

Block RAMs and DSP blocks follow the rules the hardware is built by:

- a RAM (memplan kind "sram") is one memory per bank per read port, all the bank's buffers in
  it (hw/onchip.py). On ECP5 a bank of MIN_BLOCK_DEPTH entries or more is built of DP16KD
  blocks, 18 bits wide up to 1024 entries, 9 up to 2048, ... (hw/bram.py); Yosys maps a
  shallower one of GENERIC_BLOCK_DEPTH entries or more, and a table (ROM) of MIN_BLOCK_DEPTH
  entries or more, to 36-bit blocks; smaller ones are LUT RAM (counted as LUTs);
- a product of two variable operands is one DSP block up to 18 bits; a wider one is one block
  per pair of 16-bit chunks of its operands (as many as their value ranges need) whose partial
  product reaches the kept bits (hw/datapath.py `_wide_mul`: an int32 product 3); products by
  constants are shifts and adds. A value the lanes share is computed once.

LUTs and flip-flops come from a linear model over counts of what the hardware is made of
(FEATURES: datapath operator bits, bank multiplexer inputs, pipeline register bits, memory port
bits, register memories, LUT RAM, dividers, controllers and transfer units), with coefficients
fitted to Yosys's counts of the apps in `patterns/` at several schedules by
`benchmarks/resources.py`, which writes them into resources_fit.json beside this file and
reports the model's error per resource. Only the targets there are calibrated (`calibrated()`).
"""

from __future__ import annotations

import json
import math
from functools import cache
from pathlib import Path

from . import ir, timing
from .errors import HwgenError
from .loops import Load, Loop, Parallel, Pipe, Store, Write
from .passes.memplan import MUX_GROUP
from .passes.pipeplan import _par_used, pipe_exprs
from .ranges import value_range

FIT = Path(__file__).with_name("resources_fit.json")
RESOURCES = ("luts", "ffs", "brams", "dsps")
NAMES = {"luts": "LUTs", "ffs": "flip-flops", "brams": "block RAMs", "dsps": "DSP blocks"}
# the linear model's inputs (features()), for LUTs and for flip-flops
_SHARED = (
    "port_bits",
    "beat_bits",
    "lane_stages",
    "write_bits",
    "ff_mem_bits",
    "tree_bits",
    "any_bank_bits",
    "divider_bits",
)
FEATURES = {
    "luts": ("one", "logic_bits", "crossbar_bits", "lutram_luts", "reg_mem_bits", "controllers", "transfers") + _SHARED,
    "ffs": (
        "one",
        "pipe_reg_bits",
        "reg_mem_bits",
        "controllers",
        "transfers",
        "acc_bits",
        "bank_reg_bits",
        "out_reg_bits",
        "lane_select_bits",
    )
    + _SHARED,
}
DSP_WIDTH = 18  # hw/dsp.py: one block makes products of up to 18 bits
PARTIAL_BITS = 16  # wider products: 16-bit partial products (timing.wide_mul)
# ECP5 DP16KD: data width -> entries (hw/bram.py); shallower RAMs are LUT RAM
DP16KD = ((18, 1024), (9, 2048), (4, 4096), (2, 8192), (1, 16384))
MIN_BLOCK_DEPTH = 128
GENERIC_BLOCK_DEPTH = 64
LUTRAM_BITS = 64  # one TRELLIS_DPR16X4 (16 x 4 bits), counted as 4 LUTs
FF_DEPTH = 8  # banks of at most this many entries (all buffers) Yosys keeps in flip-flops


def estimate(compiled, target: str = "ecp5") -> dict:
    """Predicted LUT, FF, block RAM and DSP counts of a compiled kernel on `target`."""
    fit = coefficients(target)
    f = features(compiled, target)
    out = {r: max(0, round(sum(fit[r].get(k, 0.0) * f[k] for k in FEATURES[r]))) for r in ("luts", "ffs")}
    out["brams"] = f["brams"]
    out["dsps"] = f["dsps"]
    return out


@cache
def _fits() -> dict:
    return json.loads(FIT.read_text()) if FIT.exists() else {}


def calibrated() -> tuple:
    """The targets the model has coefficients for (resources_fit.json)."""
    return tuple(_fits())


def coefficients(target: str) -> dict:
    """The fitted coefficients of `target`."""
    fits = _fits()
    if target not in fits:
        raise HwgenError(
            f"the resource model has no calibration for target '{target}'; expected one of {', '.join(fits)}"
        )
    return fits[target]["coefficients"]


def features(compiled, target: str = "ecp5") -> dict:
    """What the hardware of `compiled` is made of, counted for the model (see FEATURES)."""
    f = dict.fromkeys(set(FEATURES["luts"]) | set(FEATURES["ffs"]) | {"brams", "dsps", "built_brams"}, 0)
    f["one"] = 1
    prog = compiled.program
    word_bits = max((d.dtype.bits for d in prog.drams), default=32)
    ports = {name: [0, 0] for name in compiled.plans}  # memory -> [read ports, write ports]
    for s in prog.scalar_outs:
        ports.setdefault(s.mem.name, [0, 0])[0] += 1
    for c, extents in _controllers(prog.root, {}):
        if isinstance(c, Pipe):
            plan = compiled.pipe_plan(c)
            for spec in plan.reads + plan.acc_reads:
                ports.setdefault(spec.mem.name, [0, 0])[0] += 1
            for spec in plan.writes:
                ports.setdefault(spec.mem.name, [0, 0])[1] += 1
            for spec in plan.reads + plan.writes + plan.acc_reads:
                f["crossbar_bits"] += _crossbar_bits(spec, compiled.plans.get(spec.mem.name))
                f["any_bank_bits"] += _any_bank_bits(spec, compiled.plans.get(spec.mem.name))
            for spec in plan.reads:
                f["lane_select_bits"] += _select_bits(spec, compiled.plans.get(spec.mem.name))
            lanes = math.prod(plan.par.values()) if plan.par else 1
            f["lane_stages"] += lanes * (plan.latency + 1)
            f["write_bits"] += sum(len(spec.lanes) * spec.mem.dtype.bits for spec in plan.writes)
            # an accumulator's read-modify-write forwards its writes in flight (hw/pipe.py)
            f["acc_bits"] += sum(len(spec.lanes) * spec.mem.dtype.bits for spec in plan.acc_reads) * (plan.latency + 1)
            f["tree_bits"] += _tree_bits(c, plan.par)
            _pipe(c, plan, extents, target, f)
            f["controllers"] += 1
        elif isinstance(c, (Load, Store)):
            ports.setdefault(c.mem.name, [0, 0])[isinstance(c, Load)] += 1
            f["transfers"] += 1
            f["beat_bits"] += compiled.words * word_bits
        elif isinstance(c, (Loop, Parallel)):
            f["controllers"] += 1
    for name, plan in compiled.plans.items():
        _memory(plan, *ports[name], target, f)
    return f


def _crossbar_bits(spec, plan) -> int:
    """Multiplexer inputs of a pipe's RAM port: each lane picks among the banks it can reach,
    for every bit of the word."""
    if plan is None or plan.kind != "sram":
        return 0
    reach = spec.reach or [None] * len(spec.lanes)
    return plan.mem.dtype.bits * sum((plan.nbanks if r is None else len(r)) - 1 for r in reach)


def _any_bank_bits(spec, plan) -> int:
    """Bits of a RAM port whose lanes can each reach any of several banks (a subscript from
    data, such as a multifold's target): every bank then selects among all the lanes."""
    if plan is None or plan.kind != "sram" or plan.nbanks < 2 or spec.reach is not None or len(spec.lanes) < 2:
        return 0
    return len(spec.lanes) * plan.nbanks * plan.mem.dtype.bits


def _tree_bits(pipe: Pipe, par: dict) -> int:
    """Adder bits of the trees that sum a pipe's lanes into the elements they accumulate
    together (lanes over counters a write's subscript does not use: passes/pipeplan.py)."""
    out = 0
    for w in pipe.writes:
        if isinstance(w, Write) and w.op is not None and par:
            used = _par_used(w.idx, par)
            together = math.prod(n for name, n in par.items() if name not in used)
            out += (together - 1) * math.prod(par[name] for name in used) * w.mem.dtype.bits
    return out


def _select_bits(spec, plan) -> int:
    """Registers of a RAM read port's lanes: each lane's data, and with more than MUX_GROUP
    banks the group's selection before it (two registered steps: memplan.MemPlan.two_steps)."""
    if plan is None or plan.kind != "sram":
        return 0
    steps = 1 + (-(-plan.nbanks // MUX_GROUP) if plan.two_steps else 0)
    return len(spec.lanes) * plan.mem.dtype.bits * steps


def _controllers(node, extents: dict):
    """(controller, the extents of the counters around and of it) for every controller."""
    inner = {**extents, **{c.name: c.extent for c in getattr(node, "counters", ())}}
    yield node, inner
    for child in getattr(node, "stages", ()) + getattr(node, "children", ()):
        yield from _controllers(child, inner)


def bram_blocks(depth: int, width: int, target: str) -> int | None:
    """Block RAMs of one read port of a RAM of `depth` entries of `width` bits (None: LUT
    RAM). ECP5: hwgen instantiates DP16KD blocks for banks of MIN_BLOCK_DEPTH entries or more
    (hw/bram.py); Yosys maps shallower ones of at least GENERIC_BLOCK_DEPTH entries to blocks
    36 bits wide, the rest to LUT RAM."""
    _check_target(target)
    if depth < GENERIC_BLOCK_DEPTH:
        return None
    modes = DP16KD if depth >= MIN_BLOCK_DEPTH else ((36, 512),)
    for bits, entries in modes:
        if depth <= entries:
            return math.ceil(width / bits)
    return math.ceil(depth / modes[-1][1]) * width


def rom_blocks(table, target: str) -> int:
    """Block RAMs of a table read as a ROM (timing.ROM_MIN entries or more): Yosys maps those
    of MIN_BLOCK_DEPTH entries or more to blocks 36 bits wide, the rest to LUTs."""
    _check_target(target)
    if len(table.values) < MIN_BLOCK_DEPTH:
        return 0
    return math.ceil(_range_bits(min(table.values), max(table.values)) / 36)


def _check_target(target: str) -> None:
    if target != "ecp5":
        raise HwgenError(f"the resource model counts block RAMs for ECP5 only, not for '{target}'")


def product_blocks(node, extents: dict, ranges: dict | None = None) -> int:
    """DSP blocks of a product of two variable operands (hw/datapath.py `_wide_mul`): one up to
    DSP_WIDTH bits, else one per pair of 16-bit chunks of the operands (as their ranges need)
    whose partial product reaches the kept bits. `ranges`: value ranges known (a memo)."""
    if not timing.wide_mul(node):
        return 1
    width = node.dtype.bits
    (alo, ahi), (blo, bhi) = (value_range(c, extents, ranges) for c in (node.a, node.b))
    if alo >= 0 and blo >= 0:
        width = min(width, ahi.bit_length() + bhi.bit_length())
    na, nb = (math.ceil(min(_range_bits(lo, hi), width) / PARTIAL_BITS) for lo, hi in ((alo, ahi), (blo, bhi)))
    return sum(1 for i in range(na) for j in range(nb) if PARTIAL_BITS * (i + j) < width)


def _range_bits(lo: int, hi: int) -> int:
    if lo >= 0:
        return max(1, hi.bit_length())
    return max((-lo - 1).bit_length(), hi.bit_length()) + 1


def _memory(plan, reads: int, writes: int, target: str, f: dict) -> None:
    """A memory's blocks and bits (hw/onchip.py, hw/bram.py): each bank keeps its own write
    enable, address and data registers and a read address register per port; a RAM not built of
    DP16KD blocks registers its read data in the fabric; banks of at most FF_DEPTH entries are
    kept in flip-flops by Yosys, the others of fewer than GENERIC_BLOCK_DEPTH in LUT RAM."""
    width = plan.mem.dtype.bits
    if plan.kind != "sram":
        f["reg_mem_bits"] += plan.mem.size * width * plan.depth
        f["port_bits"] += (reads + writes) * width
        return
    banks = plan.nbanks
    depth = plan.depth * math.prod(
        1 << max(0, (-(-n // b) - 1).bit_length()) for n, b in zip(plan.mem.shape, plan.banks)
    )
    abits = max(1, (depth - 1).bit_length())
    blocks = bram_blocks(depth, width, target)
    if blocks is None and depth <= FF_DEPTH:
        f["ff_mem_bits"] += banks * depth * width
    elif blocks is None:
        f["lutram_luts"] += banks * reads * 4 * math.ceil(depth * width / LUTRAM_BITS)
    else:
        f["brams"] += banks * reads * blocks
        if target == "ecp5" and depth >= MIN_BLOCK_DEPTH:
            f["built_brams"] += banks * reads * blocks  # DP16KD instances (hw/bram.py)
    if depth < MIN_BLOCK_DEPTH:
        f["out_reg_bits"] += banks * reads * width
    f["bank_reg_bits"] += banks * (width + abits + 1 + reads * abits)
    f["port_bits"] += banks * (reads + writes) * width


def _pipe(pipe: Pipe, plan, extents: dict, target: str, f: dict) -> None:
    """Count a pipe's datapath: each node once per lane of the par counters it depends on (a
    value the lanes share is computed once)."""
    stage = plan.timing.stage
    lanes_of = _lanes(plan.par)
    last_use: dict = {}
    exprs = pipe_exprs(pipe)
    nodes = []
    seen: set = set()
    ranges: dict = {}  # value ranges, shared by the pipe's products
    for e in exprs:
        for n in ir.walk(e, seen):
            nodes.append(n)
            for o in ir.children(n):
                last_use[o] = max(last_use.get(o, 0), stage.get(n, 0))
    for n in nodes:
        bits = _bits(n)
        lanes = lanes_of(n)
        if timing.multiplier(n):
            f["dsps"] += lanes * product_blocks(n, extents, ranges)
        if isinstance(n, ir.Table) and len(n.values) >= timing.ROM_MIN:
            f["brams"] += lanes * rom_blocks(n, target)
        divider = timing.divider_bits(n)
        if divider is not None:
            f["divider_bits"] += lanes * divider[0] * divider[1]
        f["logic_bits"] += lanes * _logic_bits(n, bits)
        held = last_use.get(n, stage.get(n, 0)) - stage.get(n, 0)
        if held > 0 and not isinstance(n, (ir.Const, ir.Param)):
            f["pipe_reg_bits"] += lanes * held * bits
        f["pipe_reg_bits"] += lanes * _latency_bits(n, bits, extents, ranges)


def _latency_bits(n, bits: int, extents: dict, ranges: dict) -> int:
    """Flip-flops of the registers an operation adds after its logic. A multiplier's operand
    and product registers are inside its DSP blocks; a wide one registers each partial product
    once more in the fabric, then the sum."""
    if timing.wide_mul(n):
        return (product_blocks(n, extents, ranges) + 1) * bits
    if timing.multiplier(n):
        return 0
    return timing.latency_of(n) * bits


def _lanes(par: dict):
    """node -> its lanes: the product of the par counters it depends on."""
    uses: dict = {}

    def lanes(n) -> int:
        return math.prod(par[name] for name in _uses(n, par, uses))

    return lanes


def _uses(n, par: dict, memo: dict) -> frozenset:
    if n in memo:
        return memo[n]
    if isinstance(n, ir.Index):
        out = frozenset([n.name]) if n.name in par else frozenset()
    else:
        kids = tuple(n.idx) if isinstance(n, ir.MemRead) else ir.children(n)
        out = frozenset().union(*(_uses(c, par, memo) for c in kids))
    memo[n] = out
    return out


def _bits(n) -> int:
    dtype = getattr(n, "dtype", None)
    return dtype.bits if dtype is not None else 32


def _logic_bits(n, bits: int) -> int:
    """Fabric operator bits of node `n` (about a LUT each)."""
    if isinstance(n, ir.Binary):
        if n.op in ir.COMPARE:
            return max(n.a.dtype.bits, n.b.dtype.bits)
        if n.op in ("add", "sub", "and", "or", "xor"):
            return bits
        if n.op in ("max", "min"):
            return 2 * bits
        if n.op in ("shl", "shr"):
            used = timing.shift_bits(n)
            return 0 if used is None else bits * (used[0] + used[1])
        if timing.shift_add(n):
            return bits * len(timing.csd_terms(timing.constant_factor(n)[1]))
        if timing.wide_mul(n):
            return 2 * bits
        return 0
    if isinstance(n, ir.Unary):
        return 0 if n.op == "invert" else 2 * bits
    if isinstance(n, ir.Select):
        return bits
    if isinstance(n, ir.Table):
        return 0 if len(n.values) >= timing.ROM_MIN else bits * len(n.values) // 4
    if isinstance(n, ir.Reduce):
        return bits
    return 0
