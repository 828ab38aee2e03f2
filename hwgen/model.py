"""The cycle model: predicted cycles per controller, and the roofline bound.

Each formula restates the timing its hardware template documents (hw/*.py); simulation checks
the sum. With the DRAM at its fixed latency, the model is exact for the controllers built so far:

    Pipe        iterations + latency + 1          (latency: the datapath's write stage)
    SeqLoop     1 + iterations * sum(stage + 1)
    Parallel    max(children); loads in parallel share one request per cycle:
                total beats + DRAM latency + 1
    Load        beats + DRAM latency + 1
    Store       beats + 1
    kernel      root + 1

Roofline: max(compute bound, memory bound), where the compute bound is the busiest pipe's total
iterations over its lanes, and the memory bound moves each input element in and each output
element out once, `words_per_cycle` per cycle each way.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .dram import DramConfig
from .hw.pipe import pipe_timing
from .hw.transfer import beats_of
from .loops import Load, Loop, LoopProgram, Parallel, Pipe, Store


@dataclass
class Prediction:
    cycles: int
    roofline: int
    compute_bound: int
    memory_bound: int
    lanes: int
    tree: dict


def predict(prog: LoopProgram, dram: DramConfig, top=None) -> Prediction:
    from .hw.top import mem_latency

    pipe_work: dict = {}

    def cycles(c, trips: int) -> tuple:
        """(cycles, report dict) of controller `c`, run `trips` times in all."""
        if isinstance(c, Pipe):
            _, latency = pipe_timing(c, mem_latency, lambda m: m.size)
            pipe_work[id(c)] = pipe_work.get(id(c), 0) + trips * c.iterations
            n = c.iterations + latency + 1
            return n, {"pipe": [k.name for k in c.counters], "iterations": c.iterations,
                       "latency": latency, "cycles": n}
        if isinstance(c, Load):
            beats = beats_of(c.mem.shape, dram.words_per_cycle)
            n = beats + dram.latency + 1
            return n, {"load": c.dram.name, "beats": beats, "cycles": n}
        if isinstance(c, Store):
            beats = beats_of(c.shape, dram.words_per_cycle)
            n = beats + 1
            return n, {"store": c.dram.name, "beats": beats, "cycles": n}
        if isinstance(c, Parallel):
            kids = [cycles(k, trips) for k in c.children]
            if all(isinstance(k, Load) for k in c.children):
                beats = sum(beats_of(k.mem.shape, dram.words_per_cycle) for k in c.children)
                n = beats + dram.latency + 1
            else:
                n = max(k[0] for k in kids)
            return n, {"parallel": [k[1] for k in kids], "cycles": n}
        if isinstance(c, Loop):
            it = c.iterations
            kids = [cycles(k, trips * it) for k in c.stages]
            n = 1 + it * sum(k[0] + 1 for k in kids)
            return n, {"loop": [k.name for k in c.counters], "iterations": it,
                       "stages": [k[1] for k in kids], "cycles": n}
        raise TypeError(type(c).__name__)

    root, tree = cycles(prog.root, 1)
    lanes = 1
    compute = max(pipe_work.values(), default=0)
    compute = math.ceil(compute / lanes)
    read_words = sum(d.size for d in prog.drams if d.role == "in")
    write_words = sum(d.size for d in prog.drams if d.role == "out")
    memory = math.ceil(max(read_words, write_words) / dram.words_per_cycle)
    return Prediction(root + 1, max(compute, memory), compute, memory, lanes, tree)
