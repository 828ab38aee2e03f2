"""Verilog emission and its lint waivers.

`to_verilog(component, name)` turns an Amaranth component into Verilog with Yosys (the same
steps as `amaranth.back.verilog.convert`, plus `opt_clean -purge` to drop wires nothing uses),
with no source attributes, so the same design always gives the same bytes. Block RAMs carry no
initial contents (hwgen never reads a block RAM word before writing it).

`waivers(name)` is a Verilator configuration file that switches off, for that generated file
only, the lint rules that flag idioms of Amaranth's and Yosys's Verilog rather than mistakes:

- PROCASSINIT: registers carry their reset value as an initialiser (FPGA power-up state).
- DECLFILENAME: one file holds the kernel and its submodules (`kernel.pipe0`, ...).
- WIDTHEXPAND / WIDTHTRUNC: Yosys writes operands of different widths and relies on Verilog's
  extension rules; truncation is hwgen's wrap-around, checked bit-exact in simulation.
- UNUSEDSIGNAL: Yosys keeps named copies of submodule ports and the carry bits of adders.
Every other -Wall warning stays on; the tests require none.
"""

from __future__ import annotations

import re
import subprocess
import sys

from amaranth._toolchain.yosys import _BuiltinYosys, find_yosys
from amaranth.back import rtlil
from amaranth.hdl import _ast, _ir, _nir
from amaranth.lib import wiring

WAIVED = ("PROCASSINIT", "DECLFILENAME", "WIDTHEXPAND", "WIDTHTRUNC", "UNUSEDSIGNAL")

_ATTRS = "-remove generator -remove top -remove src -remove amaranth.hierarchy -remove amaranth.decoding"


def to_verilog(component: wiring.Component, name: str) -> str:
    yosys = _Yosys(["-q", "-"])  # starting takes a while: it overlaps the netlist's building
    try:
        ports = {}
        for path, member, value in component.signature.flatten(component):
            if isinstance(value, _ast.ValueCastable):
                value = value.as_value()
            direction = _ir.PortDirection.Input if member.flow == wiring.In else _ir.PortDirection.Output
            ports["__".join(map(str, path))] = (value, direction)
        fragment = _ir.Fragment.get(component, None)
        text = _to_rtlil(fragment, ports, name)
        script = [
            f"read_rtlil <<rtlil\n{text}\nrtlil",
            "proc -nomux -norom",
            "memory_collect",
            "opt_clean -purge",
            f"attrmap {_ATTRS}",
            f"attrmap -modattr {_ATTRS}",
            "write_verilog -norename",
        ]
        script_out = yosys.run("\n".join(script))
    finally:
        yosys.close()
    return _ZERO_INIT.sub("", script_out)


class _Yosys:
    """Amaranth's Yosys (`find_yosys`), run once with `args`. The built-in one (Yosys compiled
    to WebAssembly, run by wasmtime in a new Python) takes about half a second to start, so it
    is started here and its script given later, in `run`; any other runs in `run`."""

    def __init__(self, args: list):
        self.binary = find_yosys(lambda version: version >= (0, 40))
        self.args = args
        self.popen = None
        if self.binary is _BuiltinYosys:
            self.popen = subprocess.Popen(
                [sys.executable, "-m", self.binary.YOSYS_PACKAGE, *args],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, encoding="utf-8")

    def run(self, stdin: str) -> str:
        if self.popen is None:
            return self.binary.run(self.args, stdin, ignore_warnings=True)
        stdout, stderr = self.popen.communicate(stdin)
        return self.binary._process_result(self.popen.returncode, stdout, stderr, True, 0)

    def close(self) -> None:
        """Stop Yosys if `run` was not reached (the design failed to build)."""
        if self.popen is not None and self.popen.returncode is None:
            self.popen.kill()
            self.popen.communicate()


def _to_rtlil(fragment, ports, name: str) -> str:
    """`amaranth.back.rtlil.convert_fragment` (no source attributes), with `_Emitter` for
    its module emitter."""
    netlist = _build_netlist(fragment, ports, name)
    empty_checker = rtlil.EmptyModuleChecker(netlist)
    builder = rtlil.Design(emit_src=False)
    name_map = _ast.SignalDict()
    for module_idx, module in enumerate(netlist.modules):
        if empty_checker.is_empty(module_idx):
            continue
        module_builder = builder.module(".".join(module.name), src_loc=module.src_loc)
        if module_idx == 0:
            module_builder.attribute("top", 1)
        _Emitter(module_builder, netlist, module, name_map, empty_checker=empty_checker).emit()
    return str(builder)


def _build_netlist(fragment, ports, name: str) -> _nir.Netlist:
    """`amaranth.hdl._ir.build_netlist`, with the check for combinational cycles done per cell
    first (see `_acyclic`): Amaranth's own check, which follows every bit's edges, runs only
    when that one finds a cycle."""
    design = fragment.prepare(ports=ports, hierarchy=(name,))
    netlist = _nir.Netlist()
    _ir._emit_netlist(netlist, design)
    if not _acyclic(netlist):
        netlist.check_comb_cycles()  # raises CombinationalCycle if a cycle is real
    netlist.resolve_all_nets()
    _ir._compute_net_flows(netlist)
    _ir._compute_ports(netlist)
    _ir._compute_ionet_dirs(netlist)
    _ir._compute_io_ports(netlist, design.ports)
    return netlist


# cells whose every output bit may depend combinationally on every input net (a superset of
# their `comb_edges_to`), and cells whose outputs depend on no input but these nets
_COMB_ALL_INPUTS = (_nir.Operator, _nir.Part, _nir.Matches, _nir.PriorityMatch,
                    _nir.AssignmentList, _nir.AsyncReadPort)
_NO_COMB_INPUT = (_nir.Top, _nir.SyncReadPort, _nir.Initial, _nir.AnyValue, _nir.Instance)


def _acyclic(netlist: _nir.Netlist) -> bool:
    """True if no combinational path leads from a cell back to itself, taking a path from
    any input of a cell to all its outputs (so it may find cycles that the bits do not form,
    never miss one). Unresolved (late) nets are followed to their drivers; a loop among them
    also counts as a cycle."""
    connections = netlist.connections
    cells = netlist.cells
    late_cell = {}  # late net -> the cell driving it, or None for a constant

    def driver(net):
        if net >= 0:
            return net >> 16 if net >= 2 else None
        found = late_cell.get(net, False)
        if found is not False:
            return found
        chain = []
        while net < 0:
            if net in late_cell:
                found = late_cell[net]
                break
            chain.append(net)
            if len(chain) > len(connections):
                raise _LateLoop
            net = connections[net]
        else:
            found = net >> 16 if net >= 2 else None
        for late in chain:
            late_cell[late] = found
        return found

    try:
        for value in netlist.signals.values():
            for net in value:
                if net < 0:
                    driver(net)
        preds = []
        for idx, cell in enumerate(cells):
            if isinstance(cell, _COMB_ALL_INPUTS):
                nets = cell.input_nets()
            elif isinstance(cell, _nir.FlipFlop):
                nets = (cell.clk, cell.arst)
            elif isinstance(cell, _NO_COMB_INPUT):
                nets = ()
            else:
                nets = {net for out in cell.output_nets(idx) for net, _ in cell.comb_edges_to(out & 0xffff)}
            found = {driver(net) for net in nets}
            found.discard(None)
            preds.append(found)
    except _LateLoop:
        return False
    # depth-first, without recursion: 1 on the current path, 2 done
    state = [0] * len(cells)
    for root in range(len(cells)):
        if state[root]:
            continue
        state[root] = 1
        stack = [(root, iter(preds[root]))]
        while stack:
            node, it = stack[-1]
            for pred in it:
                if state[pred] == 1:
                    return False
                if not state[pred]:
                    state[pred] = 1
                    stack.append((pred, iter(preds[pred])))
                    break
            else:
                state[node] = 2
                stack.pop()
    return True


class _LateLoop(Exception):
    pass


class _Emitter(rtlil.ModuleEmitter):
    """Amaranth's RTLIL module emitter, with faster paths that write the same RTLIL."""

    def emit_memory(self, cell_idx, cell):
        # Amaranth builds the initial contents as one constant net per bit (a block RAM of
        # 64 K bits: 64 K nets); the same constant, written directly
        mask = (1 << cell.width) - 1
        bits = "".join(f"{row & mask:0{cell.width}b}" for row in reversed(cell.init))
        self.builder.cell("$meminit_v2", ports={
            "ADDR": "{  }",
            "DATA": f"{len(bits)}'{bits}" if bits else "{  }",
            "EN": f"{cell.width}'{'1' * cell.width}" if cell.width else "{  }",
        }, parameters={
            "MEMID": self.memories[cell_idx].memid,
            "ABITS": 0,
            "WIDTH": cell.width,
            "WORDS": cell.depth,
            "PRIORITY": 0,
        }, src_loc=cell.src_loc)


# Block RAMs are written before they are read, so their all-zero initial contents carry no
# meaning; dropping them keeps the Verilog (and Verilator's compile) small.
_ZERO_INIT = re.compile(r"\n  initial begin\n(?:    [^\n=]+\[\d+\] = \d+'[bdh]0+;\n)+  end")


def waivers(name: str) -> str:
    lines = ["`verilator_config", f"// Lint waivers for the generated {name}.v (see hwgen/verilog.py for why)."]
    lines += [f'lint_off -rule {rule} -file "*{name}.v"' for rule in WAIVED]
    return "\n".join(lines) + "\n"
