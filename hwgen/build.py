# amaranth: UnusedElaboratable=no
# (a design whose building fails part-way is dropped on purpose; Amaranth need not warn)
"""Build: a kernel and its schedule become an Amaranth design, Verilog and a report.

The layers point one way: the compile pipeline (passes/) gives a `Compiled` value, the
hardware (hw/) is built from it, and the cycle model and the report read the `Compiled`
value, never the hardware.

    elaborate(kernel) -> Design     everything in memory: loop program, component, Verilog
    build(kernel, out_dir) -> Design  also writes out_dir/<kernel>/<kernel>.v and report.json

Files are written to a temporary folder and renamed into place, so a failed build leaves
nothing half-written.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path

from . import loops
from .core_file import core_file
from .dram import DramConfig, word_bits
from .errors import HwgenError, LanesWarning
from .hw import axi_regs, device
from .hw.axi_top import AxiTop
from .hw.sources import with_sources
from .hw.top import Top
from .model import predict
from .passes import Compiled, compile, log_step, show_ir_wanted
from .verilog import to_verilog, waivers


@dataclass
class Design:
    """A built kernel. `component` is the Amaranth `wiring.Component` (instantiate it inside
    your own design); `verilog` its Verilog text; `report` what report.json holds."""

    kernel: object
    dram: DramConfig
    compiled: Compiled
    component: Top
    verilog: str
    report: dict
    paths: dict = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.kernel.name

    @property
    def program(self) -> loops.LoopProgram:
        return self.compiled.program

    @property
    def flags(self) -> list:
        return flag_ports(self.program)

    @property
    def module(self) -> str:
        return top_module(self)


def top_module(design) -> str:
    """A built design's Verilog top module: the kernel's name, with `_axi` when wrapped in AXI."""
    return design.report.get("axi", {}).get("module", design.name)


def flag_ports(prog: loops.LoopProgram) -> list:
    """The run-time fault outputs: `overflow_<g>` per group-by, `range_<m>` per multifold
    accumulator written at subscripts from data (each valid while done)."""
    return [f"overflow_{g.name}" for g in prog.groups] + [f"range_{m.name}" for m in loops.checked_mems(prog)]


def compile_kernel(kernel, dram: DramConfig | None = None, show_ir: bool | None = None) -> Compiled:
    """The kernel's program through the compile pipeline (passes/__init__.py) under its schedule."""
    words = (dram or DramConfig()).words_per_cycle
    try:
        return compile(kernel.program, kernel.schedule, words, show_ir)
    except HwgenError as e:
        if e.loc is None:
            e.loc = kernel.schedule.loc
        raise


def loop_program(kernel) -> loops.LoopProgram:
    """The kernel's loop program under its schedule (controllers named, loads hoisted)."""
    return compile_kernel(kernel).program


def elaborate(
    kernel, dram: DramConfig | None = None, target: str | None = None, show_ir: bool | None = None, wrap=None
) -> Design:
    """`target` ("ecp5") builds multipliers and block RAMs as that device's primitives (for
    synthesis; see hw/device.py); None builds the generic design that simulates anywhere.
    `wrap="axi"` puts the kernel behind an AXI4 master and an AXI4-Lite slave (hw/axi_top.py)."""
    check_wrap(wrap)
    dram = dram or DramConfig()
    started = time.perf_counter()
    compiled = compile_kernel(kernel, dram, show_ir)
    warn_idle_lanes(kernel, dram, predict(compiled, dram))
    try:
        with device.primitives(target):
            t = time.perf_counter()
            if wrap == "axi":
                top = AxiTop(compiled, dram, flag_ports(compiled.program))
            else:
                top = Top(compiled, dram)
            text = to_verilog(top, f"{kernel.name}_axi" if wrap else kernel.name)
            seconds = time.perf_counter() - t
    except HwgenError as e:
        if e.loc is None:
            e.loc = kernel.schedule.loc
        raise
    compiled = replace(compiled, steps=compiled.steps + (("hardware and verilog", seconds),))
    if show_ir_wanted(show_ir):
        log_step("hardware and verilog", seconds, f"  {len(text) // 1024} KB of Verilog")
    elapsed = time.perf_counter() - started
    report = make_report(kernel, dram, compiled, word_bits(d.dtype for d in compiled.program.drams), elapsed)
    if wrap == "axi":
        report["axi"] = axi_report(kernel.name, top)
    return Design(kernel, dram, compiled, top, text, report)


WRAPS = ("axi",)


def check_wrap(wrap) -> None:
    if wrap is not None and wrap not in WRAPS:
        raise HwgenError(f"unknown wrap {wrap!r}; expected one of {', '.join(map(repr, WRAPS))} or None (no wrapper)")


def axi_report(name: str, top) -> dict:
    """report.json's `axi` entry: the ports' widths and the control registers."""
    return {
        "module": f"{name}_axi",
        "data_bits": top.data_bits,
        "addr_bits": top.addr_bits,
        "word_bytes": top.word_bytes,
        "control_addr_bits": top.lite_bits,
        "registers": axi_regs.describe(top.regs),
        "header": f"{name}_regs.h",
    }


def idle_lanes(kernel, dram: DramConfig, prediction) -> tuple | None:
    """(index, lanes, cycles) when a quarter or fewer of an index's lanes already give no more
    predicted cycles (the DRAM cannot feed the rest), else None. Tries the schedule's `par`
    entries one at a time, halving while the prediction holds."""
    from .kernel import Kernel
    from .schedule import Schedule

    s = kernel.schedule
    for name, lanes in s.par.items():
        best, fewer = None, lanes // 2
        while fewer >= 1 and lanes % fewer == 0:
            schedule = Schedule(s.tile, {**s.par, name: fewer}, s.metapipeline, s.loc)
            try:
                cycles = predict(compile_kernel(Kernel(kernel.fn, schedule, kernel.program), dram), dram).cycles
            except HwgenError:
                break
            if cycles > prediction.cycles:
                break
            best, fewer = (name, fewer, cycles), fewer // 2
        if best is not None and best[1] * 4 <= lanes:
            return best
    return None


def warn_idle_lanes(kernel, dram: DramConfig, prediction) -> None:
    """Warn (LanesWarning, at the schedule's line) when lanes exceed what DRAM can feed."""
    found = idle_lanes(kernel, dram, prediction)
    if found is None:
        return
    name, lanes, cycles = found
    message = (
        f"kernel '{kernel.name}': par {kernel.schedule.par[name]} on '{name}' is more than the "
        f"DRAM can feed: par {lanes} gives {cycles} cycles against {prediction.cycles} (memory "
        f"bound {prediction.memory_bound}); more lanes only add banks and build time, so use par {lanes}"
    )
    loc = kernel.schedule.loc
    if loc is None:
        warnings.warn(message, LanesWarning, stacklevel=3)
    else:
        warnings.warn_explicit(message, LanesWarning, loc.file, loc.line)


def make_report(kernel, dram: DramConfig, compiled: Compiled, bits: int, seconds: float) -> dict:
    """What report.json holds, from the compiled kernel alone (no hardware is read)."""
    prog = compiled.program
    model = predict(compiled, dram)
    return {
        "kernel": kernel.name,
        "schedule": kernel.schedule.describe(),
        **({"auto": kernel.auto} if kernel.auto else {}),
        "dram": {
            "latency": dram.latency,
            "words_per_cycle": dram.words_per_cycle,
            "word_bits": bits,
            "addr_bits": dram.addr_bits,
        },
        "predicted_cycles": model.cycles,
        "roofline_cycles": model.roofline,
        "compute_bound_cycles": model.compute_bound,
        "memory_bound_cycles": model.memory_bound,
        "lanes": model.lanes,
        "memories": [compiled.plans[m.name].describe() for m in prog.mems],
        "ports": {
            "params": [{"name": p.name, "dtype": p.dtype.name} for p in kernel.params if not p.is_array],
            "arrays": [
                {"name": d.name, "dtype": d.dtype.name, "shape": list(d.shape), "role": d.role} for d in prog.drams
            ],
            "results": [{"name": s.name, "dtype": s.mem.dtype.name} for s in prog.scalar_outs],
        },
        "controllers": with_sources(model.tree, prog),
        "build_seconds": round(seconds, 3),
        "pass_seconds": {name: round(s, 4) for name, s in compiled.steps},
    }


def build(kernel, out_dir="rtl_out", dram: DramConfig | None = None, show_ir: bool | None = None, wrap=None) -> Design:
    design = elaborate(kernel, dram, show_ir=show_ir, wrap=wrap)
    return write(kernel, design, out_dir)


def write(kernel, design: Design, out_dir="rtl_out") -> Design:
    """Write an elaborated design's files (<kernel>.v, <kernel>.vlt, report.json) to
    out_dir/<kernel>/, each written whole to a temporary folder first and then moved into place
    (a failure leaves the earlier files, or nothing); other files there (waves, synthesis
    results and logs in their subfolders) stay. An unwritable out_dir is a HwgenError."""
    out = os.fspath(out_dir)
    created = not os.path.exists(out)
    try:
        os.makedirs(out, exist_ok=True)
        tmp = tempfile.mkdtemp(prefix=f".{kernel.name}-", dir=out)
    except OSError as e:
        _remove_if_empty(out, created)
        raise HwgenError(f"cannot write the output folder '{out}': {e.strerror or e}") from None
    final = os.path.join(out, kernel.name)
    files = design_files(design)
    try:
        for name, text in files.items():
            with open(os.path.join(tmp, name), "w") as f:
                f.write(text)
        if os.path.exists(final) and not os.path.isdir(final):
            os.remove(final)
        os.makedirs(final, exist_ok=True)
        for name in files:
            os.replace(os.path.join(tmp, name), os.path.join(final, name))
    except OSError as e:
        _remove_if_empty(out, created)
        raise HwgenError(f"cannot write '{final}': {e.strerror or e}") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    module = top_module(design)
    design.paths = {
        "verilog": os.path.join(final, f"{module}.v"),
        "waivers": os.path.join(final, f"{module}.vlt"),
        "report": os.path.join(final, "report.json"),
        "core": os.path.join(final, f"{module}.core"),
    }
    if "axi" in design.report:
        design.paths["header"] = os.path.join(final, design.report["axi"]["header"])
    return design


def design_files(design: Design) -> dict:
    """File name -> text of a built design: <module>.v, its Verilator waivers <module>.vlt,
    its FuseSoC core <module>.core, report.json, and with AXI the C header of its registers."""
    module = top_module(design)
    files = {f"{module}.v": design.verilog, f"{module}.vlt": waivers(module)}
    extra = ()
    if "axi" in design.report:
        axi = design.report["axi"]
        top = design.component
        files[axi["header"]] = axi_regs.c_header(design.name, top.regs, top.data_bits, top.word_bytes)
        extra = (axi["header"],)
    files[f"{module}.core"] = core_file(module, f"{module}.v", f"{module}.vlt", extra)
    files["report.json"] = json.dumps(design.report, indent=2) + "\n"
    return files


def add_to_report(path, key: str, entry: dict) -> dict:
    """report.json at `path` with `entry` stored under `key` (replacing what was there),
    rewritten whole through a temporary file; the new report."""
    report = json.loads(Path(path).read_text())
    report[key] = entry
    tmp = Path(path).with_suffix(".json.tmp")
    tmp.write_text(json.dumps(report, indent=2) + "\n")
    os.replace(tmp, path)
    return report


def _remove_if_empty(path: str, created: bool) -> None:
    if created:
        try:
            os.rmdir(path)
        except OSError:
            pass
