r"""Verilog emission and its lint waivers.

`to_verilog(component, name)` turns an Amaranth component into Verilog with Yosys (the same
steps as `amaranth.back.verilog.convert`, plus `opt_clean -purge` to drop wires nothing uses),
so the same design always gives the same bytes:

- Amaranth's source attributes (lines of hwgen itself) are dropped; the module of each unit
  that implements the user's code carries instead `(* src = "app.py:12" *)`, the user's
  lines (the component's `sources()`: hw/sources.py).
- No escaped identifiers: verilog_names.plain_names writes each name Yosys escapes
  (`\kernel.pe0.pipe0`, `\done$11`) as a plain one (`kernel_pe0_pipe0`, `done_11`).
- Block RAMs carry no initial contents (hwgen never reads a block RAM word before writing it).

Speed (the same RTLIL, byte for byte, as Amaranth's `convert_fragment`): Yosys starts while
the design is elaborated (`_Yosys`); expression shapes are computed once each (`_cached_shapes`);
combinational cycles are checked per cell (`_acyclic`), Amaranth's per-bit check kept for
when that finds one; netlist values are made with cheaper checks (`_fast_values`); and the
RTLIL emitter writes block RAM contents and cell wires in bulk (`_Emitter`).

`waivers(name)` is a Verilator configuration file that switches off, for that generated file
only, the lint rules that flag idioms of Amaranth's and Yosys's Verilog rather than mistakes:

- PROCASSINIT: registers carry their reset value as an initialiser (FPGA power-up state).
- DECLFILENAME: one file holds the kernel and its submodules (`kernel_pe0_pipe0`, ...).
- WIDTHEXPAND / WIDTHTRUNC: Yosys writes operands of different widths and relies on Verilog's
  extension rules; truncation is hwgen's wrap-around, checked bit-exact in simulation.
- UNUSEDSIGNAL: Yosys keeps named copies of submodule ports and the carry bits of adders.
Every other -Wall warning stays on; the tests require none.
"""

from __future__ import annotations

import contextlib
import re
import subprocess
import sys

import amaranth
from amaranth._toolchain.yosys import _BuiltinYosys, find_yosys
from amaranth.back import rtlil
from amaranth.hdl import _ast, _ir, _nir
from amaranth.lib import wiring

from .verilog_names import MODULE, plain_names

WAIVED = ("PROCASSINIT", "DECLFILENAME", "WIDTHEXPAND", "WIDTHTRUNC", "UNUSEDSIGNAL")

_ATTRS = "-remove generator -remove top -remove src -remove amaranth.hierarchy -remove amaranth.decoding"


def to_verilog(component: wiring.Component, name: str) -> str:
    yosys = _Yosys(["-q", "-"])  # starting takes a while: it overlaps the netlist's building
    try:
        text = to_rtlil(component, ports_of(component), name)
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
    text = _ZERO_INIT.sub("", script_out)
    sources = component.sources() if hasattr(component, "sources") else {}
    return plain_names(with_src_attributes(text, name, sources))


def with_src_attributes(text: str, top: str, sources: dict) -> str:
    """Yosys's Verilog `text` of module `top` with `(* src = "..." *)` before each submodule
    named in `sources` (instance path under `top`, like "pe0.pipe0" -> the attribute's text)."""

    def attribute(match):
        name = match.group(1)
        src = sources.get(name[len(top) + 1 :]) if name.startswith(top + ".") else None
        return f'(* src = "{src}" *)\n{match.group(0)}' if src else match.group(0)

    return MODULE.sub(attribute, text)


class _Yosys:
    """Amaranth's Yosys (`find_yosys`), run once with `args`. The built-in one (Yosys compiled
    to WebAssembly, run by wasmtime in a new Python) takes a quarter to half a second to start, so it
    is started here and its script given later, in `run`; any other runs in `run`."""

    def __init__(self, args: list):
        self.binary = find_yosys(lambda version: version >= (0, 40))
        self.args = args
        self.popen = None
        if self.binary is _BuiltinYosys:
            self.popen = subprocess.Popen(
                [sys.executable, "-m", self.binary.YOSYS_PACKAGE, *args],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                encoding="utf-8",
            )

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


def ports_of(component: wiring.Component) -> dict:
    """The component's ports for conversion: Verilog name -> (value, direction)."""
    ports = {}
    for path, member, value in component.signature.flatten(component):
        if isinstance(value, _ast.ValueCastable):
            value = value.as_value()
        direction = _ir.PortDirection.Input if member.flow == wiring.In else _ir.PortDirection.Output
        ports["__".join(map(str, path))] = (value, direction)
    return ports


# The fast paths below restate internals of this Amaranth release; with any other, hwgen
# takes Amaranth's own path (slower, the same RTLIL).
FAST = amaranth.__version__ == "0.5.10"


def to_rtlil(component, ports: dict, name: str, fast: bool | None = None) -> str:
    """The RTLIL text of `component` with `ports` (name -> (value, direction)), no source
    attributes: Amaranth's `convert_fragment`, through the fast paths when `fast` (default:
    with the Amaranth release they restate)."""
    if not (FAST if fast is None else fast):
        return rtlil.convert_fragment(_ir.Fragment.get(component, None), ports, name, emit_src=False)[0]
    with _cached_shapes():  # elaborating (hwgen's templates) and building the netlist
        fragment = _ir.Fragment.get(component, None)
        return _to_rtlil(fragment, ports, name)


def _to_rtlil(fragment, ports, name: str) -> str:
    """`amaranth.back.rtlil.convert_fragment` (no source attributes), with `_Emitter` for
    its module emitter."""
    with _fast_values():
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


_Net = _nir.Net
_NET_ONLY = frozenset((_Net,))


def _value_new(cls, nets=()):
    """`_nir.Value.__new__`, its check (every item a Net) done by type in C first: Amaranth's
    checks each item in a Python generator, a tenth of the netlist's time."""
    if isinstance(nets, _Net):
        return tuple.__new__(cls, (nets,))
    value = tuple.__new__(cls, nets)
    if not _NET_ONLY.issuperset(map(type, value)):
        for net in value:
            _Net.ensure(net)  # Amaranth's check: a Net, or a subclass of it
    return value


_from_cell = _Net.from_cell.__func__


def _net_from_cell(cls, cell, bit):
    """`_nir.Net.from_cell`, its checks by comparison (Amaranth's builds a range per call)."""
    if 0 <= bit < 0x10000 and (cell > 0 or (cell == 0 and bit >= 2)):
        return cls((cell << 16) | bit)
    return _from_cell(cls, cell, bit)  # Amaranth's assertion


_from_const = _Net.from_const.__func__
_CONSTS = (_Net(0), _Net(1))


def _net_from_const(cls, val):
    """`_nir.Net.from_const`, its two nets made once."""
    if cls is _Net and val in (0, 1):
        return _CONSTS[val == 1]
    return _from_const(cls, val)


_SHAPED = (_ast.Operator, _ast.Concat, _ast.SwitchValue)
_shapes = None  # id(value) -> (value, its shape), while `_cached_shapes` is in force


def _shape_once(shape):
    """An Amaranth `shape` method that computes each value's shape once (an operator's,
    concatenation's or multiplexer's shape is its operands', each found again at every
    call: Amaranth asks for them at each level of an expression, and again to build the
    netlist). The value is kept with its shape, so its id is not reused meanwhile."""

    def cached(self):
        cache = _shapes
        if cache is None:  # restored meanwhile (another thread)
            return shape(self)
        hit = cache.get(id(self))
        if hit is None:
            hit = cache[id(self)] = (self, shape(self))
        return hit[1]

    return cached


@contextlib.contextmanager
def _cached_shapes():
    """Operators', concatenations' and multiplexers' shapes computed once each inside."""
    global _shapes
    if _shapes is not None:  # already in force
        yield
        return
    saved = [cls.__dict__["shape"] for cls in _SHAPED]
    _shapes = {}
    for cls, shape in zip(_SHAPED, saved):
        cls.shape = _shape_once(shape)
    try:
        yield
    finally:
        for cls, shape in zip(_SHAPED, saved):
            cls.shape = shape
        _shapes = None


def _resolve_value(self, value):
    """`_nir.Netlist.resolve_value`, returning a Value without late nets as it is."""
    if type(value) is _nir.Value and (not value or min(value) >= 0):
        return value
    return _nir.Value(self.resolve_net(net) for net in value)


@contextlib.contextmanager
def _fast_values():
    """Amaranth's netlist values built and resolved by the same rules, faster, while the
    netlist is built and written (then Amaranth's own again)."""
    saved = (_nir.Value.__new__, _nir.Netlist.resolve_value, _Net.__dict__["from_cell"], _Net.__dict__["from_const"])
    _nir.Value.__new__, _nir.Netlist.resolve_value = staticmethod(_value_new), _resolve_value
    _Net.from_cell, _Net.from_const = classmethod(_net_from_cell), classmethod(_net_from_const)
    try:
        yield
    finally:
        (_nir.Value.__new__, _nir.Netlist.resolve_value, _Net.from_cell, _Net.from_const) = saved


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
    _compute_net_flows(netlist)
    _ir._compute_ports(netlist)
    _ir._compute_ionet_dirs(netlist)
    _ir._compute_io_ports(netlist, design.ports)
    return netlist


def _compute_net_flows(netlist: _nir.Netlist) -> None:
    """`amaranth.hdl._ir._compute_net_flows` (see there), uses of a net already known in its
    module skipped before a call: the same flows, entered in the same order."""
    lca = {}
    modules = netlist.modules
    internal, output, input_ = (_nir.ModuleNetFlow.Internal, _nir.ModuleNetFlow.Output, _nir.ModuleNetFlow.Input)
    for cell_idx, cell in enumerate(netlist.cells):
        flow = modules[cell.module_idx].net_flow
        for net in cell.output_nets(cell_idx):
            lca[net] = cell.module_idx
            flow[net] = internal
    depth = [len(module.name) for module in modules]

    def use_net(net, use_module):
        def_module = lca[net]
        while depth[def_module] > depth[use_module]:
            modules[def_module].net_flow[net] = output
            def_module = modules[def_module].parent
        while depth[def_module] < depth[use_module]:
            if net in modules[use_module].net_flow:
                return
            modules[use_module].net_flow[net] = input_
            use_module = modules[use_module].parent
        while def_module != use_module:
            modules[def_module].net_flow[net] = output
            def_module = modules[def_module].parent
            modules[use_module].net_flow[net] = input_
            use_module = modules[use_module].parent
        modules[def_module].net_flow[net] = internal
        lca[net] = def_module

    for cell in netlist.cells:
        module_idx = cell.module_idx
        flow = modules[module_idx].net_flow
        for net in cell.input_nets():
            if net not in flow and not 0 <= net <= 1:
                use_net(net, module_idx)
    for module_idx, module in enumerate(modules):
        flow = module.net_flow
        for signal in module.signal_names:
            for net in netlist.signals[signal]:
                if net not in flow and not 0 <= net <= 1:
                    use_net(net, module_idx)


# cells whose every output bit may depend combinationally on every input net (a superset of
# their `comb_edges_to`), and cells whose outputs depend on no input but these nets
_COMB_ALL_INPUTS = (_nir.Operator, _nir.Part, _nir.Matches, _nir.PriorityMatch, _nir.AssignmentList, _nir.AsyncReadPort)
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
        preds = [{driver(net) for net in _comb_inputs(cell, idx)} - {None} for idx, cell in enumerate(cells)]
    except _LateLoop:
        return False
    return not _has_cycle(preds)


def _comb_inputs(cell, idx: int):
    """The nets from which a combinational path may reach some output of `cell`."""
    if isinstance(cell, _COMB_ALL_INPUTS):
        return cell.input_nets()
    if isinstance(cell, _nir.FlipFlop):
        return (cell.clk, cell.arst)
    if isinstance(cell, _NO_COMB_INPUT):
        return ()
    return {net for out in cell.output_nets(idx) for net, _ in cell.comb_edges_to(out & 0xFFFF)}


def _has_cycle(preds: list) -> bool:
    """Whether the graph (node -> its predecessors) has a cycle: depth-first, without
    recursion (state 1: on the current path, 2: done)."""
    state = [0] * len(preds)
    for root in range(len(preds)):
        if state[root]:
            continue
        state[root] = 1
        stack = [(root, iter(preds[root]))]
        while stack:
            node, it = stack[-1]
            for pred in it:
                if state[pred] == 1:
                    return True
                if not state[pred]:
                    state[pred] = 1
                    stack.append((pred, iter(preds[pred])))
                    break
            else:
                state[node] = 2
                stack.pop()
    return False


class _LateLoop(Exception):
    pass


def _cell_value(cell_idx: int, width: int) -> _nir.Value:
    """The Value of a cell's `width` output bits (`_nir.Net.from_cell` for each)."""
    if cell_idx > 0 and width <= 0x10000:
        base = cell_idx << 16
        return tuple.__new__(_nir.Value, map(_Net, range(base, base + width)))
    return _nir.Value(_nir.Net.from_cell(cell_idx, bit) for bit in range(width))


class _Emitter(rtlil.ModuleEmitter):
    """Amaranth's RTLIL module emitter, with faster paths that write the same RTLIL."""

    def emit_cell_wires(self):
        # Amaranth's, each cell's output nets made in one step
        for cell_idx in self.module.cells:
            cell = self.netlist.cells[cell_idx]
            if isinstance(cell, (_nir.Operator, _nir.Part, _nir.AnyValue, _nir.SyncReadPort, _nir.AsyncReadPort)):
                width = cell.width
            elif isinstance(cell, _nir.FlipFlop):
                width = len(cell.data)
            elif isinstance(cell, _nir.AssignmentList):
                width = len(cell.default)
            else:
                self._emit_cell_wires_of(cell_idx, cell)
                continue
            self.cell_wires[cell_idx] = self.emit_driven_wire(_cell_value(cell_idx, width))

    def _emit_cell_wires_of(self, cell_idx, cell):
        """Amaranth's emit_cell_wires, for the cells that `emit_cell_wires` does not handle."""
        if isinstance(cell, _nir.Instance):
            for name, (start, width) in cell.ports_o.items():
                nets = [_nir.Net.from_cell(cell_idx, start + bit) for bit in range(width)]
                self.instance_wires[cell_idx, name] = self.emit_driven_wire(_nir.Value(nets))
            return
        if isinstance(
            cell,
            (
                _nir.Top,
                _nir.PriorityMatch,
                _nir.Matches,
                _nir.SyncPrint,
                _nir.AsyncPrint,
                _nir.SyncProperty,
                _nir.AsyncProperty,
                _nir.Memory,
                _nir.SyncWritePort,
            ),
        ):
            return
        if isinstance(cell, _nir.Initial):
            width = 1
        elif isinstance(cell, _nir.IOBuffer):
            if cell.dir is _nir.IODirection.Output:
                return
            width = len(cell.port)
        else:
            assert False, cell
        self.cell_wires[cell_idx] = self.emit_driven_wire(_cell_value(cell_idx, width))

    def collect_init_attrs(self):
        # Amaranth's (a flip-flop's reset value is its output wire's `init` attribute)
        for cell_idx in self.module.cells:
            cell = self.netlist.cells[cell_idx]
            if isinstance(cell, _nir.FlipFlop):
                width = len(cell.data)
                attrs = {"init": _ast.Const(cell.init, width), **cell.attributes}
                self.value_attrs[_cell_value(cell_idx, width)] = attrs

    def sigspec(self, *parts):
        # Amaranth's, on a plain tuple: runs of constant bits, and of consecutive bits of a wire
        value = []
        for part in parts:
            if isinstance(part, _Net):
                value.append(part)
            else:
                value.extend(_nir.Value(part))
        nets = self.nets
        chunks = []
        count = len(value)
        begin = 0
        while begin < count:
            net = value[begin]
            end = begin + 1
            if 0 <= net <= 1:
                while end < count and 0 <= value[end] <= 1:
                    end += 1
                bits = "".join("1" if value[i] else "0" for i in range(end - 1, begin - 1, -1))
                chunks.append(f"{end - begin}'{bits}")
            else:
                wire, start = nets[net]
                bit = start + 1
                while end < count and not 0 <= value[end] <= 1 and nets[value[end]] == (wire, bit):
                    end += 1
                    bit += 1
                if end - begin == 1:
                    chunks.append(f"{wire.name} [{start}]")
                else:
                    chunks.append(f"{wire.name} [{bit - 1}:{start}]")
            begin = end
        if len(chunks) == 1:
            return chunks[0]
        return "{ " + " ".join(reversed(chunks)) + " }"

    def emit_memory(self, cell_idx, cell):
        # Amaranth builds the initial contents as one constant net per bit (a block RAM of
        # 64 K bits: 64 K nets); the same constant, written directly
        mask = (1 << cell.width) - 1
        bits = "".join(f"{row & mask:0{cell.width}b}" for row in reversed(cell.init))
        self.builder.cell(
            "$meminit_v2",
            ports={
                "ADDR": "{  }",
                "DATA": f"{len(bits)}'{bits}" if bits else "{  }",
                "EN": f"{cell.width}'{'1' * cell.width}" if cell.width else "{  }",
            },
            parameters={
                "MEMID": self.memories[cell_idx].memid,
                "ABITS": 0,
                "WIDTH": cell.width,
                "WORDS": cell.depth,
                "PRIORITY": 0,
            },
            src_loc=cell.src_loc,
        )


# Block RAMs are written before they are read, so their all-zero initial contents carry no
# meaning; dropping them keeps the Verilog (and Verilator's compile) small.
_ZERO_INIT = re.compile(r"\n  initial begin\n(?:    [^\n=]+\[\d+\] = \d+'[bdh]0+;\n)+  end")


def waivers(name: str) -> str:
    lines = ["`verilator_config", f"// Lint waivers for the generated {name}.v (see hwgen/verilog.py for why)."]
    lines += [f'lint_off -rule {rule} -file "*{name}.v"' for rule in WAIVED]
    return "\n".join(lines) + "\n"
