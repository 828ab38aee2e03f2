"""Memory planning: how each on-chip memory is built, and the check that it can serve every
access.

- kind: memories of at most REG_LIMIT elements are registers (any number of ports, reads in
  the same cycle); larger ones are SRAM, read `latency` cycles after the address (hw/bram.py: Yosys
  maps it to LUT RAM or block RAM, whichever is cheaper, unless the ECP5 netlist instantiates
  block RAM itself).
- banks: an SRAM is split cyclically along each dimension d into banks[d] banks (element
  idx lives in bank (idx[d] % banks[d])_d), so that the lanes of a parallel access, and the
  words of a DRAM beat, reach different banks in the same cycle.
- depth: a memory written in one stage of a metapipeline and read in a later one has one
  buffer per stage in flight: depth = reader stage - writer stage + 1 (Spatial's rule).

An access that cannot be served (two lanes on the same element, a writer in a later stage
than a reader, two metapipelines claiming one memory) is a ScheduleError naming the memory's
array and the access; nothing is duplicated or guessed silently.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from .. import ir
from ..affine import to_affine
from ..errors import ScheduleError
from ..loops import AppendWrite, GroupWrite, Load, Loop, LoopProgram, Mem, Parallel, Pipe, Store, _expr_str, write_exprs

REG_LIMIT = 4
MAX_BANKS = 1024
# RAMs of more banks than this pick a lane's data in two registered steps (groups of
# MUX_GROUP banks, then the group): one more cycle of read latency, a shorter path
MUX_GROUP = 4
# banks (of as many lanes) that one flip-flop of a shared signal may drive directly: up to this
# many (gemm at par 16: 151 MHz on the ECP5-85k) a read index, a valid flag or a buffer select
# drives them; beyond, they get copies per group of lanes, and a RAM of more banks registers
# each lane's read address once more (hw/pipe.py, hw/onchip.py)
BANK_FANOUT = 16


@dataclass(frozen=True)
class Access:
    """One port's use of a memory: by `ctrl` (a Pipe, Load or Store), at `path` (the enclosing
    (loop name, stage index, metapipelined) triples), with `lanes`: one offset tuple per lane
    relative to lane 0 (a single zero tuple for a scalar access)."""

    mem: Mem
    ctrl: object
    path: tuple
    write: bool
    lanes: tuple
    text: str = ""
    names: tuple = ()  # for each lane, its (par counter, lane offset) pairs


@dataclass(frozen=True)
class MemPlan:
    mem: Mem
    kind: str  # "regs" | "sram"
    banks: tuple  # per dimension (all 1 for registers)
    depth: int  # buffers
    owner: str | None = None  # name of the metapipelined Loop that rotates the buffers
    accesses: tuple = field(default=(), repr=False)

    @property
    def two_steps(self) -> bool:
        """A RAM of more than MUX_GROUP banks: its crossbars span many block RAMs across the
        chip, so each direction takes one more register (hw/onchip.py)."""
        return self.kind == "sram" and self.nbanks > MUX_GROUP

    @property
    def registered_reads(self) -> bool:
        """A RAM of more than BANK_FANOUT banks: each lane's read address (and bank number) is
        registered before it reaches its banks' address registers, so that no flip-flop of a
        signal the lanes share (a tile store's row counter) drives every bank."""
        return self.kind == "sram" and self.nbanks > BANK_FANOUT

    @property
    def latency(self) -> int:
        """Cycles from a read's address to its data (RAM: the lane's address register with
        `registered_reads`, the bank's address register, the read, its output register, then
        the bank multiplexer's register, or its two registers when there are more than
        MUX_GROUP banks)."""
        if self.kind != "sram":
            return 0
        return 4 + self.two_steps + self.registered_reads

    @property
    def registered_writes(self) -> bool:
        """A RAM of more than MUX_GROUP banks written only by tile loads, whose words reach
        any bank: each lane's request is registered before it is steered to its bank (an
        accumulator, written by its pipe, keeps the shorter write: it bounds forwarding)."""
        return self.two_steps and all(isinstance(a.ctrl, Load) for a in self.accesses if a.write)

    @property
    def write_latency(self) -> int:
        """Clock edges from a write port's request to the memory holding it (RAM: the bank's
        write is registered, so the route into a block RAM starts from a flip-flop; one more
        with `registered_writes`)."""
        if self.kind != "sram":
            return 0
        return 2 if self.registered_writes else 1

    @property
    def unseen_writes(self) -> int:
        """How many of the latest cycles' writes a read does not see: a RAM samples the read's
        registered address a cycle after it is given (two with `registered_reads`), seeing the
        writes that landed before, and a write lands `write_latency` edges after its request."""
        if self.kind != "sram":
            return 0
        return self.latency - 1 - self.registered_reads + self.write_latency

    @property
    def nbanks(self) -> int:
        n = 1
        for b in self.banks:
            n *= b
        return n

    def describe(self) -> dict:
        return {
            "name": self.mem.name,
            "holds": self.mem.label,
            "dtype": self.mem.dtype.name,
            "shape": list(self.mem.shape),
            "kind": {"regs": "registers", "sram": "RAM", "group": "content-addressed registers"}[self.kind],
            "banks": list(self.banks),
            "buffers": self.depth,
        }


def lane_values(counters) -> list:
    """Every lane of a pipe: a dict par-counter name -> lane offset (row-major)."""
    par = [c for c in counters if c.par > 1]
    return [dict(zip((c.name for c in par), combo)) for combo in itertools.product(*(range(c.par) for c in par))]


def affine_parts(idx, par: dict, loc=None) -> list:
    """Each subscript as an Affine; a data-dependent subscript (a multifold's target, say)
    becomes Affine 0 for lane purposes, which is only right when no par counter feeds it
    (otherwise a ScheduleError at `loc`, the user's line of the memory accessed)."""
    out = []
    for e in idx:
        aff = to_affine(e)
        if aff is None:
            lanes = sorted({n.name for n in ir.walk(e) if isinstance(n, ir.Index) and n.name in par})
            if lanes:
                user = ", ".join(sorted({f"'{n.split('.')[0]}'" for n in lanes}))
                raise ScheduleError(
                    f"a subscript computed from data changes with the parallel lanes of index {user}, so two "
                    f"lanes could use one element at once; drop par on {user} or parallelise another index",
                    loc,
                )
            aff = to_affine(ir.Const(0, e.dtype))
        out.append(aff)
    return out


def lane_offsets(idx, counters, loc=None) -> tuple:
    """(offsets, names): for each lane of an access (over the par counters its index uses),
    its offset along each dimension, and its (counter, lane offset) pairs."""
    par = {c.name: c.par for c in counters if c.par > 1}
    affs = affine_parts(idx, par, loc)
    used = sorted({n for a in affs for n, c in a.terms if n in par and c})
    lanes, names = [], []
    for combo in itertools.product(*(range(par[n]) for n in used)):
        value = dict(zip(used, combo))
        lanes.append(tuple(sum(c * value.get(n, 0) for n, c in a.terms) for a in affs))
        names.append(tuple(zip(used, combo)))
    return tuple(lanes), tuple(names)


def used_par(idx, counters) -> set:
    par = {c.name for c in counters if c.par > 1}
    return {n for e in idx for n, c in (to_affine(e).terms if to_affine(e) else ()) if n in par and c}


def collect(prog: LoopProgram, words: int) -> list:
    """Every access to every on-chip memory."""
    out = []

    def go(ctrl, path):
        if isinstance(ctrl, Loop):
            for k, stage in enumerate(ctrl.stages):
                go(stage, path + ((ctrl.name, k, ctrl.meta),))
        elif isinstance(ctrl, Parallel):
            for c in ctrl.children:
                go(c, path)
        elif isinstance(ctrl, Pipe):
            out.extend(_pipe_accesses(ctrl, path))
        elif isinstance(ctrl, (Load, Store)):
            out.extend(_transfer_accesses(ctrl, path, words))

    go(prog.root, ())
    return out


def _pipe_accesses(ctrl: Pipe, path: tuple) -> list:
    out = []
    for w in ctrl.writes:
        out.extend(_reads(ctrl, path, write_exprs(w)))
        if isinstance(w, GroupWrite):
            continue  # the group's memory takes the update itself
        if isinstance(w, AppendWrite):
            one = ((),)
            text = f"the count {w.count.name}"
            out.append(Access(w.count, ctrl, path, False, one, text, ((),)))
            out.append(Access(w.count, ctrl, path, True, one, text, ((),)))
            lanes = tuple((k,) for k in range(len(w.items)))
            names = tuple((("item", k),) for k in range(len(w.items)))
            out.append(Access(w.values, ctrl, path, True, lanes, f"the appends to {w.values.name}", names))
            continue
        target = f"the write to {w.mem.name}[{', '.join(_expr_str(i) for i in w.idx)}]"
        lanes, names = lane_offsets(w.idx, ctrl.counters, w.mem.loc)
        if w.op is not None:
            out.append(Access(w.mem, ctrl, path, False, lanes, target, names))
        out.append(Access(w.mem, ctrl, path, True, lanes, target, names))
    return out


def _transfer_accesses(ctrl, path: tuple, words: int) -> list:
    """A tile load's writes (or a store's reads): one lane per word of a DRAM beat."""
    shape = ctrl.mem.shape
    n = min(words, shape[-1]) if shape else 1
    lanes = tuple(tuple([0] * (len(shape) - 1) + [k]) for k in range(n)) if shape else ((),)
    names = tuple((("word", k),) for k in range(len(lanes)))
    out = [
        Access(
            ctrl.mem,
            ctrl,
            path,
            isinstance(ctrl, Load),
            lanes,
            f"the {'load' if isinstance(ctrl, Load) else 'store'} of '{ctrl.dram.name}'",
            names,
        )
    ]
    if isinstance(ctrl, Store) and ctrl.limit is not None:
        out.extend(_reads(ctrl, path, [ctrl.limit]))
    return out


def _reads(ctrl, path: tuple, exprs) -> list:
    counters = getattr(ctrl, "counters", ())
    out = []
    for e in exprs:
        for n in ir.walk(e):
            if isinstance(n, ir.MemRead):
                lanes, names = lane_offsets(n.idx, counters, n.mem.loc)
                text = f"the read {n.source or _expr_str(n)}"
                out.append(Access(n.mem, ctrl, path, False, lanes, text, names))
    return out


def congruent_banks(starts, grains, banks) -> tuple:
    """The bank tuples whose number along each dimension d is congruent to starts[d] modulo
    grains[d] (grains[d] divides banks[d]): the banks a lane stepping in multiples of the grains
    can reach."""
    return tuple(itertools.product(*(range(s % g, b, g) for s, g, b in zip(starts, grains, banks))))


def _name(mem: Mem) -> str:
    return mem.label or mem.name


def _lane(names) -> str:
    return "(" + ", ".join(f"{n[:-2] if n.endswith('.l') else n}={v}" for n, v in names) + ")"


def _check_lanes(a: Access, banks: tuple, loc) -> None:
    """Distinct lanes of one access must reach distinct banks (distinct elements for registers)."""
    seen = {}
    for k, off in enumerate(a.lanes):
        key = tuple(o % b for o, b in zip(off, banks)) if banks else off
        if key in seen:
            what = "element" if off == a.lanes[seen[key]] else "memory bank"
            raise ScheduleError(
                f"cannot serve {a.text} ({_name(a.mem)}) with these parallel lanes: lanes "
                f"{_lane(a.names[seen[key]])} and {_lane(a.names[k])} need the same {what} in the "
                f"same cycle; choose par so that each lane touches its own element",
                loc,
            )
        seen[key] = k


def _pow2(n: int) -> int:
    p = 1
    while p < n:
        p *= 2
    return p


def plan(prog: LoopProgram, words: int) -> dict:
    """MemPlan for every memory of `prog` (by name), for DRAM beats of `words` words."""
    accesses = collect(prog, words)
    by_mem: dict = {m.name: [] for m in prog.mems}
    for a in accesses:
        by_mem[a.mem.name].append(a)
    plans = {}
    grouped = {m.name for g in prog.groups for m in (g.keys, g.values, g.count)}
    for mem in prog.mems:
        acc = by_mem[mem.name]
        loc = mem.loc
        if mem.name in grouped:  # registers inside the group-by's content-addressed memory
            plans[mem.name] = MemPlan(mem, "group", tuple(1 for _ in mem.shape), 1, None, tuple(acc))
            continue
        if mem.size <= REG_LIMIT:
            for a in acc:
                _check_lanes(a, (), loc)
            kind, banks = "regs", tuple(1 for _ in mem.shape)
        else:
            banks = []
            for d in range(len(mem.shape)):
                span = max((max(o[d] for o in a.lanes) - min(o[d] for o in a.lanes) + 1 for a in acc), default=1)
                banks.append(_pow2(span))
            banks = tuple(banks)
            total = 1
            for b in banks:
                total *= b
            if total > MAX_BANKS:
                raise ScheduleError(
                    f"{_name(mem)} would need {total} memory banks to serve its parallel lanes "
                    f"(at most {MAX_BANKS}); use fewer lanes",
                    loc,
                )
            for a in acc:
                _check_lanes(a, banks, loc)
            kind = "sram"
        owner, depth = _buffering(mem, acc, loc)
        plans[mem.name] = MemPlan(mem, kind, banks, depth, owner, tuple(acc))
    return plans


def _buffering(mem: Mem, acc: list, loc) -> tuple:
    """(owner loop name, depth) of a memory's N-buffer, from the stages its accesses sit in."""
    loops = {}
    for a in acc:
        for loop_id, stage, meta in a.path:
            if meta:
                entry = loops.setdefault(loop_id, {"w": set(), "r": set(), "n": 0})
                entry["w" if a.write else "r"].add(stage)
                entry["n"] += 1
    owners = [(lid, e) for lid, e in loops.items() if e["w"] and len(e["w"] | e["r"]) > 1]
    if not owners:
        return None, 1
    if len(owners) > 1:
        raise ScheduleError(
            f"{_name(mem)} is shared across the stages of two metapipelines; "
            f"run one of them sequentially (metapipeline=False)",
            loc,
        )
    owner, e = owners[0]
    if len(e["w"]) > 1:
        raise ScheduleError(f"{_name(mem)} is written in two stages of one metapipeline", loc)
    (w,) = e["w"]
    if any(r < w for r in e["r"]):
        raise ScheduleError(f"{_name(mem)} is read in a metapipeline stage before the stage that writes it", loc)
    if e["n"] != len(acc):
        raise ScheduleError(f"{_name(mem)} is buffered by a metapipeline but also used outside it", loc)
    return owner, max(e["r"]) - w + 1
