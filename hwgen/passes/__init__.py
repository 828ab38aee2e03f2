"""The compile pipeline: a traced program and its schedule become a `Compiled` value, with no
hardware built. Each pass is a pure function in its own file; the order is written once, here.

    compile(program, schedule, dram) -> Compiled

PIPELINE (IR -> IR, each `pass(ir, schedule)`):
    lower         patterns + tiles + lanes -> the loop program (fuse, strip-mine, extract
                  reductions into accumulator loops, tile copies, pipes); loops sequential
    hoist         after lowering: a tile load no loop counter moves leaves its loop
    overlap       a mesh PE's root entries in levels: a collective beside the work that
                  neither feeds it nor reads it (a Parallel)
    metapipeline  after hoisting, which changes stage counts: which loops overlap their stages
    name          once the tree's shape is final: each controller gets its instance name

ANALYSES (what the hardware and the cycle model read, computed once):
    memplan       every on-chip memory's kind, banks, depth and buffers (by memory name);
                  needs the names (a buffer's owner is a loop's name)
    pipeplan      every pipe's lanes, ports, datapath timing and latency (by pipe name);
                  needs the memory plans (a RAM's read latency)

Set the environment variable HWGEN_SHOW_IR=1 (or `hwgen build --show-ir`) to print the IR
after each step, with the time it took.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

from ..loops import LoopProgram, Pipe, show, walk
from .hoist import hoist_loads
from .lower import lower
from .memplan import plan as plan_memories
from .metapipeline import metapipeline
from .names import name_units
from .overlap import overlap
from .pipeplan import plan_pipe


def _lower(program, schedule) -> LoopProgram:
    return lower(program, schedule.tiles, schedule.par)


PIPELINE = (
    ("lower", _lower),
    ("hoist", hoist_loads),
    ("overlap", overlap),
    ("metapipeline", metapipeline),
    ("name", name_units),
)


@dataclass(frozen=True)
class Compiled:
    """A kernel compiled under its schedule: the loop program (controllers named), the memory
    plans (memory name -> passes.memplan.MemPlan), the pipe plans (pipe name ->
    passes.pipeplan.PipePlan), the DRAM words per beat they were planned for, and the time
    each step took (name, seconds)."""

    program: LoopProgram
    plans: dict
    pipes: dict
    words: int
    steps: tuple = field(default=(), compare=False)

    def pipe_plan(self, pipe: Pipe):
        return self.pipes[pipe.name]


def compile(program, schedule, words_per_cycle: int = 4, show_ir: bool | None = None) -> Compiled:  # noqa: A001
    """Run PIPELINE and ANALYSES on a traced `program` (program.Program) under `schedule`
    (schedule.Schedule) for DRAM beats of `words_per_cycle` words."""
    show_ir = show_ir_wanted(show_ir)
    steps = []
    ir, text = program, None
    for name, step in PIPELINE:
        started = time.perf_counter()
        ir = step(ir, schedule)
        steps.append((name, time.perf_counter() - started))
        if show_ir:
            new = show(ir)
            _log(name, steps[-1][1], "  (unchanged)" if new == text else new)
            text = new
    started = time.perf_counter()
    plans = plan_memories(ir, words_per_cycle)
    steps.append(("memplan", time.perf_counter() - started))
    if show_ir:
        _log("memplan", steps[-1][1], "\n".join(_plan_line(p) for p in plans.values()))
    started = time.perf_counter()
    pipes = {c.name: plan_pipe(c, plans) for c in walk(ir.root) if isinstance(c, Pipe)}
    steps.append(("pipeplan", time.perf_counter() - started))
    if show_ir:
        _log(
            "pipeplan",
            steps[-1][1],
            "\n".join(
                f"  {n}: lanes {dict(p.par) or 1}, latency {p.latency}, {len(p.reads) + len(p.acc_reads)} read "
                f"and {len(p.writes)} write ports"
                for n, p in pipes.items()
            ),
        )
    return Compiled(ir, plans, pipes, words_per_cycle, tuple(steps))


def show_ir_wanted(show_ir: bool | None) -> bool:
    """`show_ir`, or when None, whether $HWGEN_SHOW_IR is set (not empty or 0)."""
    if show_ir is None:
        return os.environ.get("HWGEN_SHOW_IR", "") not in ("", "0")
    return bool(show_ir)


def _plan_line(p) -> str:
    d = p.describe()
    owner = f", rotated by {p.owner}" if p.owner else ""
    return (
        f"  {d['name']}: {d['kind']} {d['dtype']}{d['shape']}, banks {d['banks']}, "
        f"{d['buffers']} buffer(s){owner}  ({d['holds']})"
    )


def log_step(name: str, seconds: float, text: str = "") -> None:
    """Print one step of the pipeline (for HWGEN_SHOW_IR): its name, time and IR."""
    _log(name, seconds, text)


def _log(name: str, seconds: float, text: str) -> None:
    print(f"== after {name} ({seconds * 1000:.1f} ms) ==" + (f"\n{text}" if text else ""), flush=True)
