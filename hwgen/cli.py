"""The `hwgen` command line.

    hwgen build APP.py [--kernel NAME] [--out DIR] [--show-ir] [--wrap axi]
    hwgen sim   APP.py [--kernel NAME] [--out DIR] [--seed S] [--waves] [--waves-from C] [--waves-to C]
                       [--latency N] [--jitter N] [--target ecp5] [--wrap axi [--pause P]] [--cocotb TEST.py]
    hwgen synth APP.py --target ice40|ecp5 [--device D] [--kernel NAME] [--out DIR] [--freq MHZ] [--wrap axi]
    hwgen --version                      (also: python -m hwgen ...)

Every user mistake is printed as one line, `error: FILE:LINE: message`, with exit status 1.
"""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import os
import sys
import time
import warnings

import numpy as np

from . import auto, cli_dse, progress
from .core_file import package_version
from .dram import DramConfig
from .errors import CliError, HwgenError, LanesWarning, Loc, MismatchError, plain_message, show_path
from .kernel import Kernel
from .lang.signature import check_args


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise CliError(message, Loc("hwgen", 0)) from None


# `sim` reports a build or run on stderr only once it has taken this many seconds
SIM_QUIET = 10.0
WRAP_HELP = "axi: the kernel behind an AXI4 master and an AXI4-Lite control slave (<kernel>_axi.v, <kernel>_regs.h)"


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="hwgen", description="Compile parallel-pattern kernels to hardware.")
    p.add_argument("--version", action="version", version=f"hwgen {package_version()}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    b = sub.add_parser("build", help="write Verilog and report.json for each kernel in APP.py")
    b.add_argument("app", metavar="APP.py")
    b.add_argument("--kernel", help="only the kernel of this name")
    b.add_argument("--out", default="rtl_out", help="output folder (default rtl_out)")
    b.add_argument(
        "--show-ir",
        action="store_true",
        help="print the pattern IR and dataflow graph, then the IR after each compiler pass with its time "
        "(also: HWGEN_SHOW_IR=1)",
    )
    b.add_argument("--wrap", choices=["axi"], help=WRAP_HELP)
    s = sub.add_parser("sim", help="simulate each kernel in Verilator and check it against the golden model")
    s.add_argument("app", metavar="APP.py")
    s.add_argument("--kernel", help="only the kernel of this name")
    s.add_argument(
        "--out",
        default="rtl_out",
        help="output folder (default rtl_out): the kernel's Verilog and report.json, with the measured "
        "cycles under 'simulation', and its waves",
    )
    s.add_argument("--seed", type=int, default=0, help="seed for random inputs (default 0)")
    s.add_argument("--waves", action="store_true", help="also write the waveform, OUT/<kernel>/<kernel>.fst")
    s.add_argument(
        "--waves-from",
        type=int,
        metavar="CYCLE",
        help="waves from this clock cycle on (cycle 0: the kernel's first after start; implies --waves)",
    )
    s.add_argument(
        "--waves-to", type=int, metavar="CYCLE", help="waves up to, not including, this cycle (implies --waves)"
    )
    s.add_argument("--latency", type=int, default=DramConfig.latency, help="DRAM read latency in cycles")
    s.add_argument("--jitter", type=int, default=0, help="random extra DRAM latency, up to this many cycles")
    s.add_argument(
        "--target",
        choices=["ecp5"],
        help="simulate the netlist synthesis uses for this device "
        "(its DSP and block RAM primitives, on models of them)",
    )
    s.add_argument("--wrap", choices=["axi"], help=WRAP_HELP + " (simulated against cocotbext-axi's AxiRam)")
    s.add_argument(
        "--pause", type=float, default=0.0, help="with --wrap axi: share of cycles each AXI channel stalls (0 to 1)"
    )
    s.add_argument(
        "--cocotb",
        metavar="TEST.py",
        help="run your own cocotb tests against the kernel behind AXI instead of hwgen's check "
        "(hwgen_sim.axi_kernel.AxiKernel loads arrays, runs the kernel and reads results; see docs/axi.md)",
    )
    y = sub.add_parser("synth", help="synthesize and place-and-route each kernel (Yosys, nextpnr): resources, Fmax")
    y.add_argument("app", metavar="APP.py")
    y.add_argument("--target", required=True, choices=["ice40", "ecp5"], help="FPGA family")
    y.add_argument("--device", help="ecp5: 25k, 45k, 85k (default); ice40: up5k (default), hx8k")
    y.add_argument("--kernel", help="only the kernel of this name")
    y.add_argument("--out", default="rtl_out", help="output folder (default rtl_out)")
    y.add_argument("--freq", type=float, default=100.0, help="clock target in MHz for place-and-route (default 100)")
    y.add_argument("--wrap", choices=["axi"], help=WRAP_HELP + "; also reports the wrapper's own resources")
    cli_dse.add_parser(sub)
    return p


def load_app(path: str):
    """Import APP.py as a module; returns it."""
    if not os.path.exists(path):
        raise CliError("no such file", Loc(path, 0))
    if not path.endswith(".py"):
        raise CliError("not a Python file (expected APP.py)", Loc(path, 0))
    name = "hwgen_app_" + os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    folder = os.path.dirname(os.path.abspath(path))
    sys.path.insert(0, folder)
    try:
        spec.loader.exec_module(module)
    except HwgenError:
        raise
    except SyntaxError as e:
        raise CliError(f"invalid Python syntax: {e.msg}", Loc(e.filename or path, e.lineno or 0)) from None
    except Exception as e:
        line = _app_line(e.__traceback__, path)
        raise CliError(f"loading the app failed: {plain_message(e)}", Loc(path, line)) from None
    finally:
        sys.path.remove(folder)
    return module


def _app_line(tb, path: str) -> int:
    line = 0
    target = os.path.abspath(path)
    while tb is not None:
        if os.path.abspath(tb.tb_frame.f_code.co_filename) == target:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def kernels_of(module, path: str, name: str | None) -> list:
    found = [(k, v) for k, v in vars(module).items() if isinstance(v, Kernel)]
    if not found:
        raise CliError("defines no @hw.kernel at module level", Loc(path, 0))
    if name is None:
        return [v for _, v in found]
    for k, v in found:
        if k == name or v.name == name:
            return [v]
    names = ", ".join(k for k, _ in found)
    raise CliError(f"no kernel named '{name}' (it has: {names})", Loc(path, 0))


def random_inputs(kernel: Kernel, seed: int) -> tuple:
    """Seeded random arguments covering each dtype's whole range."""
    rng = np.random.default_rng(seed)
    out = []
    for p in kernel.params:
        shape = p.shape or ()
        if p.dtype.is_bool:
            v = rng.integers(0, 2, shape).astype(np.bool_)
        else:
            v = rng.integers(p.dtype.min, p.dtype.max, shape, dtype=p.dtype.np, endpoint=True)
        out.append(v if p.shape else (v.item() if p.dtype.is_bool else p.dtype.np.type(v)))
    return tuple(out)


def app_inputs(module, kernel: Kernel, seed: int, path: str):
    """The app's own inputs() for this kernel, or None."""
    fn = getattr(module, "inputs", None)
    if fn is None:
        return None
    try:
        params = inspect.signature(fn).parameters
        value = fn(seed) if params else fn()
    except HwgenError:
        raise
    except Exception as e:
        raise CliError(f"inputs() failed: {plain_message(e)}", Loc(path, _app_line(e.__traceback__, path))) from None
    if isinstance(value, dict):
        value = value.get(kernel.name)
        if value is None:
            return None
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


def _elaborate(kernel, show_ir, wrap=None):
    """The kernel's design in memory (a mesh kernel's through hwgen/mesh/hardware.py)."""
    if kernel.mesh is not None:
        from .mesh import hardware

        if wrap:
            raise CliError(f"--wrap {wrap} wraps a single-PE kernel; '{kernel.name}' runs on a mesh", Loc("hwgen", 0))
        return hardware.elaborate(kernel, None, "build", show_ir)
    return kernel.elaborate(show_ir=show_ir, wrap=wrap)


def cmd_build(args) -> int:
    from .build import write

    module = load_app(args.app)
    built = []
    for k in kernels_of(module, args.app, args.kernel):  # every kernel compiles before any is written
        t = time.perf_counter()
        if args.show_ir:
            print(k.show_ir(), flush=True)
        built.append((k, _elaborate(k, args.show_ir or None, args.wrap), time.perf_counter() - t))
    for k, design, seconds in built:
        try:
            design = write(k, design, args.out)
        except HwgenError as e:  # the output folder is the command line's, not the app's
            raise CliError(e.message, Loc("hwgen", 0)) from None
        r = design.report
        if k.auto:
            print(auto.describe(k))
        print(
            f"built {k.name}: {design.paths['verilog']}  predicted {r['predicted_cycles']} cycles, "
            f"roofline {r['roofline_cycles']}  ({seconds:.2f} s)"
        )
    return 0


def _waves(args):
    """The `waves=` argument of --waves, --waves-from and --waves-to: a CliError when bad."""
    if args.waves_from is None and args.waves_to is None:
        return args.waves
    first = 0 if args.waves_from is None else args.waves_from
    if first < 0 or (args.waves_to is not None and args.waves_to <= first):
        raise CliError(
            f"--waves-from and --waves-to take clock cycles with 0 <= from < to; got from {first}, to {args.waves_to}",
            Loc("hwgen", 0),
        )
    return (first, args.waves_to)


def _check_sim_options(args) -> None:
    """The sim command's options that do not go together: a CliError."""
    if not 1 <= args.latency <= 200:
        raise CliError(f"--latency must be from 1 to 200 cycles, got {args.latency}", Loc("hwgen", 0))
    if not 0 <= args.jitter <= 200:
        raise CliError(f"--jitter must be from 0 to 200 cycles, got {args.jitter}", Loc("hwgen", 0))
    if args.wrap and (args.latency != DramConfig.latency or args.jitter or args.target or args.waves):
        raise CliError(
            "--latency, --jitter, --target and --waves apply to the native DRAM channel's simulation; with --wrap axi "
            "the memory is cocotbext-axi's AxiRam (use --pause for back-pressure)",
            Loc("hwgen", 0),
        )
    if not 0 <= args.pause < 1 or (args.pause and not args.wrap):
        raise CliError(
            f"--pause takes a share of cycles from 0 to 1 (below 1), with --wrap axi; got {args.pause}", Loc("hwgen", 0)
        )


def cmd_sim(args) -> int:
    args.waves = _waves(args)
    if args.cocotb:
        return _user_tests(args)
    _check_sim_options(args)
    module = load_app(args.app)
    dram = DramConfig(latency=args.latency, jitter=args.jitter)
    status = 0
    for k in kernels_of(module, args.app, args.kernel):
        inputs = app_inputs(module, k, args.seed, args.app)
        source = "inputs()"
        if inputs is None:
            inputs, source = random_inputs(k, args.seed), f"random inputs, seed {args.seed}"
        else:
            try:
                check_args(k.name, k.params, inputs)
            except HwgenError as e:
                fn = module.inputs
                raise CliError(
                    f"inputs() returned a bad argument: {e.message}",
                    Loc(fn.__code__.co_filename, fn.__code__.co_firstlineno),
                ) from None
        try:
            if args.wrap:
                if k.mesh is not None:
                    raise CliError(
                        f"--wrap {args.wrap} wraps a single-PE kernel; '{k.name}' runs on a mesh", Loc("hwgen", 0)
                    )
                r = k.verify(*inputs, seed=args.seed, wrap=args.wrap, pause=args.pause)
            else:
                with progress.showing(f"sim {k.name}", quiet=SIM_QUIET):  # long builds and runs, on stderr
                    r = k.verify(
                        *inputs, waves=args.waves, dram=dram, seed=args.seed, target=args.target, out_dir=args.out
                    )
        except MismatchError as e:
            print(f"FAIL {k.name}: {e.message}")
            status = 1
            continue
        report = _record(k, r, args, source)
        err = 100 * r.prediction_error
        netlist = f", {args.target} netlist" if args.target else ""
        if args.wrap:
            print(
                f"PASS {k.name} ({source}, behind AXI{f', pause {args.pause}' if args.pause else ''}): measured "
                f"{r.cycles} cycles from start to done (the native DRAM channel's prediction: {r.predicted_cycles}); "
                f"build {r.build_seconds:.1f} s, simulation {r.sim_seconds:.1f} s"
            )
            if report:
                print(f"  report: {report}")
            continue
        print(
            f"PASS {k.name} ({source}{netlist}): measured {r.cycles} cycles, predicted {r.predicted_cycles} "
            f"({err:+.1f} % of measured), roofline {r.roofline_cycles} (measured is "
            f"{100 * r.roofline_efficiency:.1f} % efficient); build {r.build_seconds:.1f} s, "
            f"simulation {r.sim_seconds:.1f} s"
        )
        if r.waves:
            print(f"  waves: {r.waves}")
        if report:
            print(f"  report: {report}")
    return status


def _user_tests(args) -> int:
    """`sim --cocotb TEST.py`: the user's cocotb tests against each kernel behind AXI."""
    from .user_test import run_user_test

    if args.latency != DramConfig.latency or args.jitter or args.target or args.waves or args.pause:
        raise CliError(
            "--cocotb runs your tests against the kernel behind AXI: --latency, --jitter, --target, --waves and "
            "--pause do not apply (your test sets the AXI RAM's stalls)",
            Loc("hwgen", 0),
        )
    if not args.cocotb.endswith(".py") or not os.path.isfile(args.cocotb):
        raise CliError("--cocotb takes a Python file of cocotb tests: no such file", Loc(args.cocotb, 0))
    module = load_app(args.app)
    status = 0
    for k in kernels_of(module, args.app, args.kernel):
        if k.mesh is not None:
            raise CliError(f"--cocotb runs a single-PE kernel behind AXI; '{k.name}' runs on a mesh", Loc("hwgen", 0))
        r = run_user_test(k, args.cocotb, args.seed)
        test = show_path(args.cocotb)
        if r.ok:
            print(f"PASS {k.name} behind AXI: {test}: {len(r.passed)} tests passed ({', '.join(r.passed)})")
        else:
            status = 1
            for name in r.failed:
                print(f"FAIL {k.name} behind AXI: {test}: {name}: {r.failures[name]}")
    return status


def _record(kernel, r, args, source: str) -> str | None:
    """Write the simulated design's Verilog and report.json to OUT/<kernel>/ with the
    measurement under 'simulation' (with --target, only into a report.json built there
    before: the Verilog there is the design's, not the device netlist's); the report's path."""
    from .build import add_to_report, write

    entry = {
        "cycles": r.cycles,
        "predicted_cycles": r.predicted_cycles,
        "roofline_cycles": r.roofline_cycles,
        "inputs": source,
        **(
            {"wrap": args.wrap, "pause": args.pause, "seed": args.seed}
            if args.wrap
            else {"dram": {"latency": args.latency, "jitter": args.jitter, "seed": args.seed}}
        ),
        **({"target": args.target} if args.target else {}),
    }
    try:
        if args.target:
            path = os.path.join(args.out, kernel.name, "report.json")
            if not os.path.exists(path):
                return None
        else:
            path = write(kernel, r.design, args.out).paths["report"]
        add_to_report(path, "simulation", entry)
    except (HwgenError, OSError) as e:  # the output folder is the command line's, not the app's
        raise CliError(
            f"cannot write the report to '{args.out}': {getattr(e, 'message', e)}", Loc("hwgen", 0)
        ) from None
    return path


def _where(loc) -> str:
    if loc is None or loc.file == "hwgen":
        return ""
    return f"{loc}: " if loc.line else f"{show_path(loc.file)}: "


def cmd_synth(args) -> int:
    from .synth import device_for

    try:
        device_for(args.target, args.device)  # a bad --device is an error before any work
    except HwgenError as e:
        raise CliError(e.message, Loc("hwgen", 0)) from None
    if not 1 <= args.freq <= 1000:
        raise CliError(f"--freq must be from 1 to 1000 MHz, got {args.freq}", Loc("hwgen", 0))
    module = load_app(args.app)
    for k in kernels_of(module, args.app, args.kernel):
        if args.wrap and k.mesh is not None:
            raise CliError(f"--wrap {args.wrap} wraps a single-PE kernel; '{k.name}' runs on a mesh", Loc("hwgen", 0))
        with progress.showing(f"synth {k.name}"):  # the tools' stages on stderr as they go
            r = k.synthesize(target=args.target, device=args.device, out_dir=args.out, freq=args.freq, wrap=args.wrap)
        fmax = f"{r['fmax_mhz']:.1f} MHz" if r["fmax_mhz"] else "unknown"
        print(
            f"synthesized {k.name}{' behind AXI' if args.wrap else ''} for the {r['device']}: {r['luts']} LUTs, "
            f"{r['ffs']} FFs, {r['brams']} block RAMs, {r['dsps']} DSPs; Fmax {fmax} ({r['seconds']:.0f} s)"
        )
        if args.wrap:
            w = r["parts"]["wrapper"]
            print(f"  the AXI wrapper alone: {w['luts']} LUTs, {w['ffs']} FFs, {w['brams']} block RAMs")
    return 0


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """hwgen's warnings as one line, `warning: FILE:LINE: message`, like its errors."""
    if issubclass(category, LanesWarning):
        print(f"warning: {filename}:{lineno}: {message}", file=sys.stderr)
    else:
        _python_show_warning(message, category, filename, lineno, file, line)


_python_show_warning = warnings.showwarning


def main(argv=None) -> int:
    warnings.showwarning = _show_warning
    try:
        args = _parser().parse_args(argv)
        if args.command is None:
            _parser().print_help()
            return 1
        commands = {"build": cmd_build, "sim": cmd_sim, "synth": cmd_synth, "dse": cli_dse.cmd_dse}
        return commands[args.command](args)
    except HwgenError as e:
        print(f"error: {_where(e.loc)}{e.message.splitlines()[0]}", file=sys.stderr)
        if getattr(e, "log", "") and os.environ.get("HWGEN_VERBOSE"):
            print(e.log, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
