"""`@hw.kernel`: a traced program plus its schedule, with the user-facing methods.

    kernel(*arrays)            the golden model (numpy in, numpy out)
    kernel.build(out_dir)      Verilog + report.json under out_dir/<kernel>/ (see build.py)
    kernel.simulate(*arrays)   Verilator through cocotb (see simulate.py)
    kernel.verify(*arrays)     simulate and compare with the golden model
    kernel.with_schedule(...)  the same program under another schedule

A kernel may run on a mesh of processing elements (`mesh=`, an hw.Mesh, with `link=`, an
hw.LinkConfig; see hwgen/mesh/). Its golden model works; build, elaborate, simulate, verify
and synthesize work for the programs hwgen/mesh/hardware.py supports (collectives over a
ring or torus, one after another, with patterns around them) and raise UnsupportedError for
the others.
"""

from __future__ import annotations

import functools

from . import interp
from .errors import HwgenError, ScheduleError, TraceError, user_loc
from .lang.program import Program, trace_program
from .lang.signature import check_args, to_user
from .mesh.checks import check_collective_matmul, check_options, check_program, check_shardings
from .schedule import Schedule
from .verilog_names import check_module_name

_UNSET = object()


class Kernel:
    """A traced kernel under a schedule. See the module docstring for its methods."""

    def __init__(
        self,
        fn,
        schedule: Schedule,
        program: Program | None = None,
        mesh=None,
        link=None,
        shardings=None,
        collective_matmul="auto",
        collective_stages=False,
        device=None,
    ):
        self.fn = fn
        self.name = fn.__name__
        why = check_module_name(self.name)
        if why:
            raise TraceError(
                f"kernel '{self.name}' cannot name its Verilog module: {why}; rename the function", schedule.loc
            )
        self.schedule = schedule
        self.auto = None  # schedule="auto": what auto.choose chose and why (report.json "auto")
        self.mesh = mesh
        self.link = link
        self.collective_matmul = collective_matmul  # "auto", True or False (mesh/hardware.py plan)
        self.collective_stages = collective_stages  # a collective as a stage of its operand's tile loop
        self.program = program if program is not None else trace_program(fn, schedule.loc)
        check_program(self.program, mesh)
        if device is not None:
            if mesh is not None:
                raise ScheduleError(
                    "schedule='auto' is for kernels on one PE; give a mesh kernel tile= and par=", schedule.loc
                )
            from .auto import choose

            self.schedule, self.auto = choose(self.program, device, schedule.loc)
        check_collective_matmul(self.program, collective_matmul, schedule.loc)
        # a global-view mesh program's placements (mesh/partition.py): one hw.P per parameter
        self.shardings = shardings  # as given to @hw.kernel
        self.in_shardings, self.out_shardings = check_shardings(self.program, mesh, shardings, schedule.loc)
        schedule.check(self.program.extents, self.name)
        functools.update_wrapper(self, fn)

    @property
    def params(self) -> tuple:
        return self.program.params

    @property
    def results(self) -> tuple:
        return tuple(r.port for r in self.program.results)

    def __call__(self, *args):
        values = check_args(self.name, self.params, args)
        outs = interp.run([r.node for r in self.program.results], values)
        outs = [to_user(r.port, o) for r, o in zip(self.program.results, outs)]
        return outs[0] if len(outs) == 1 else tuple(outs)

    def with_schedule(self, tile=_UNSET, par=_UNSET, metapipeline=_UNSET, device=None) -> "Kernel":
        """A new kernel: the same program under another schedule (unset fields are kept).
        `with_schedule("auto", device="ecp5-85k")`: the schedule auto.choose picks for it."""
        auto = isinstance(tile, str) and tile == "auto"
        if auto or device is not None:
            loc = user_loc()
            _check_auto("auto" if auto else None, device, _UNSET if auto else tile, par, metapipeline, loc)
            return self._copy(Schedule(loc=loc), device=AUTO_DEVICE if device is None else device)
        s = self.schedule
        schedule = Schedule.parse(
            s.tile if tile is _UNSET else tile,
            s.par if par is _UNSET else par,
            s.metapipeline if metapipeline is _UNSET else metapipeline,
            loc=user_loc(),
        )
        return self._copy(schedule)

    def _copy(self, schedule: Schedule, device=None) -> "Kernel":
        return Kernel(
            self.fn,
            schedule,
            self.program,
            self.mesh,
            self.link,
            self.shardings,
            self.collective_matmul,
            self.collective_stages,
            device,
        )

    def build(self, out_dir="rtl_out", dram=None, show_ir=None, wrap=None):
        """Elaborate the hardware and write out_dir/<kernel>/<kernel>.v and report.json.
        `show_ir=True` prints the IR after each compiler pass (default: $HWGEN_SHOW_IR).
        `wrap="axi"`: the kernel behind an AXI4 master and an AXI4-Lite control slave
        (<kernel>_axi.v, and the registers' C header <kernel>_regs.h)."""
        from .build import build

        if self.mesh is not None:
            from .mesh import hardware

            _mesh_options(self, "build", wrap=wrap)
            return hardware.build(self, out_dir=out_dir, dram=dram, show_ir=show_ir)
        return build(self, out_dir=out_dir, dram=dram, show_ir=show_ir, wrap=_wrap(wrap))

    def elaborate(self, dram=None, show_ir=None, wrap=None):
        """The hardware design in memory (no files written): a `build.Design`."""
        from .build import elaborate

        if self.mesh is not None:
            from .mesh import hardware

            _mesh_options(self, "elaborate", wrap=wrap)
            return hardware.elaborate(self, dram, "elaborate", show_ir)
        return elaborate(self, dram=dram, show_ir=show_ir, wrap=_wrap(wrap))

    def simulate(self, *args, waves=False, dram=None, seed=None, monitor=None, target=None, wrap=None, pause=0.0):
        """Run the hardware in Verilator; returns a `SimResult` (see simulate.py).
        target="ecp5" runs the netlist that synthesis for ECP5 uses. wrap="axi" runs the kernel
        behind AXI against cocotbext-axi's RAM and control master (axi_sim.py), whose AXI
        channels stall in a `pause` share of cycles at random (`seed`)."""
        from .simulate import simulate

        if self.mesh is not None:
            _mesh_options(self, "simulate", target=target, wrap=wrap)
            from .mesh.simulate import simulate as simulate_mesh

            return simulate_mesh(self, args, dram=dram, seed=seed, monitor=monitor, waves=waves)
        if _wrap(wrap):
            return self._simulate_axi(
                args, waves=waves, dram=dram, seed=seed, monitor=monitor, target=target, pause=pause
            )
        return simulate(self, args, waves=waves, dram=dram, seed=seed, monitor=monitor, target=target)

    def verify(
        self, *args, waves=False, dram=None, seed=None, target=None, runs=1, out_dir="rtl_out", wrap=None, pause=0.0
    ):
        """Simulate and compare every output with the golden model (raises MismatchError).
        `runs`: run the kernel that many times without a reset in between; the last is checked.
        `waves=True` keeps the waveform as out_dir/<kernel>/<kernel>.fst, `waves=(first, end)` only
        the clock cycles first <= c < end (counted from start, as `cycles`). `wrap`, `pause`: as
        for simulate."""
        from .simulate import compare, verify

        if self.mesh is not None:
            _mesh_options(self, "verify", target=target, runs=runs != 1, wrap=wrap)
            from .mesh.simulate import verify as verify_mesh

            return verify_mesh(self, args, dram=dram, seed=seed, waves=waves, out_dir=out_dir)
        if _wrap(wrap):
            res = self._simulate_axi(args, waves=waves, dram=dram, seed=seed, target=target, runs=runs, pause=pause)
            compare(self, args, res.outputs, user_loc())
            return res
        return verify(self, args, waves=waves, dram=dram, seed=seed, target=target, runs=runs, out_dir=out_dir)

    def _simulate_axi(self, args, pause, seed, dram, **unsupported):
        from .axi_sim import simulate_axi
        from .errors import UnsupportedError

        used = [name for name, value in unsupported.items() if value and not (name == "runs" and value == 1)]
        if used:
            raise UnsupportedError(f"wrap='axi' simulation does not take {', '.join(used)} yet", user_loc())
        return simulate_axi(self, check_args(self.name, self.params, tuple(args)), dram, seed, pause, user_loc())

    def synthesize(self, target="ecp5", device=None, out_dir="rtl_out", freq=100.0, dram=None, wrap=None) -> dict:
        """Build, then synthesize and place-and-route with Yosys and nextpnr (see synth.py);
        returns the resources and Fmax, also stored in report.json under "synthesis".
        wrap="axi": the kernel behind AXI; `parts` splits the resources into wrapper and kernel."""
        from .synth import synthesize_build

        return synthesize_build(self.build(out_dir=out_dir, dram=dram, wrap=wrap), target, device, freq)

    def show_ir(self) -> str:
        """The traced pattern IR and its dataflow graph, as text."""
        from .graph import show
        from .mesh.show import show_shard_maps

        parts = [show(self.program), show_shard_maps(self.program)]
        if self.mesh is not None:
            from .mesh.pipeline_hw import is_pipeline
            from .mesh.show import show_pipeline

            if is_pipeline(self):
                return "\n".join([parts[0], show_pipeline(self)])
        if self.mesh is not None and not parts[1]:  # a global-view program: its partition
            from .dram import DramConfig
            from .errors import HwgenError
            from .mesh.hardware import plan

            try:
                mp = plan(self, "partition", DramConfig())
                choice = f"\n  all-gather feeding a contraction: {mp.choice}" if mp.choice else ""
                parts.append("partitioned for the mesh:\n" + show_shard_maps(mp.partitioned) + choice)
            except HwgenError as e:
                parts.append(f"not partitioned: {e.message}")
        return "\n".join(t for t in parts if t)

    def __repr__(self) -> str:
        return f"<hw.kernel {self.name} {self.schedule.describe()}>"


AUTO_DEVICE = "ecp5-85k"


def _check_auto(schedule, device, tile, par, metapipeline, loc) -> None:
    """`schedule="auto"` (with an optional `device`) and no tile, par or metapipeline beside it."""
    if schedule != "auto":
        raise ScheduleError(
            f"schedule must be 'auto' (or left out, with tile= and par=), got {schedule!r}"
            if schedule is not None
            else "device= goes with schedule='auto'; add schedule='auto' (a hand-written schedule fits any device)",
            loc,
        )
    if tile is not _UNSET or par is not _UNSET or metapipeline is not _UNSET:
        raise ScheduleError(
            "schedule='auto' chooses tile and par itself (metapipelined); remove tile=, par= and metapipeline=", loc
        )


def _wrap(wrap):
    """`wrap` checked: None or "axi" (HwgenError at the user's line otherwise)."""
    from .build import check_wrap

    try:
        check_wrap(wrap)
    except HwgenError as e:
        e.loc = e.loc or user_loc()
        raise
    return wrap


def _mesh_options(kernel, what: str, **options) -> None:
    """Options a mesh kernel's simulation does not support yet: UnsupportedError."""
    from .errors import UnsupportedError

    used = [name for name, value in options.items() if value]
    if used:
        raise UnsupportedError(
            f"cannot {what} mesh kernel '{kernel.name}' with {', '.join(used)}: not supported for meshes yet",
            user_loc(),
        )


def kernel(
    fn=None,
    *,
    tile=None,
    par=None,
    metapipeline=None,
    mesh=None,
    link=None,
    in_shardings=None,
    out_shardings=None,
    collective_matmul="auto",
    collective_stages=False,
    schedule=None,
    device=None,
):
    """Decorator: `@hw.kernel` or `@hw.kernel(tile={...}, par={...}, metapipeline=True,
    mesh=hw.Mesh(...), link=hw.LinkConfig(...), in_shardings=(hw.P(...), ...), out_shardings=hw.P(...),
    collective_matmul="auto", collective_stages=False)`, or `@hw.kernel(schedule="auto",
    device="ecp5-85k")`: the schedule chosen for the device (hwgen/auto.py)."""
    loc = user_loc()
    if schedule is not None or device is not None:
        given = [_UNSET if v is None else v for v in (tile, par, metapipeline)]
        _check_auto(schedule, device, *given, loc)
        device = AUTO_DEVICE if device is None else device
    schedule = Schedule.parse(tile, par, True if metapipeline is None else metapipeline, loc)
    check_options(mesh, link, loc, collective_matmul, collective_stages)
    shardings = (in_shardings, out_shardings)
    options = {
        "mesh": mesh,
        "link": link,
        "shardings": shardings,
        "collective_matmul": collective_matmul,
        "collective_stages": collective_stages,
        "device": device,
    }
    if fn is not None:
        return Kernel(fn, schedule, **options)
    return lambda f: Kernel(f, schedule, **options)
