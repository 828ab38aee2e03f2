"""`hwgen dse APP.py --device ecp5-85k`: the design-space exploration command (hwgen/dse.py).

    hwgen dse APP.py [--device D] [--kernel NAME] [--out DIR] [--limit N] [--workers N]
                     [--scheduler ADDRESS] [--verify K] [--synth K [--no-place]]

Sweeps each kernel's schedules on Dask (a LocalCluster of `--workers` processes, or the
cluster at `--scheduler`), prints the Pareto front, writes OUT/<kernel>/dse/dse.{json,csv,png},
and with `--verify K` / `--synth K` simulates (Verilator) and synthesizes (Yosys, nextpnr) the
K fastest points of the front, each beside its prediction. `--no-place` synthesizes with Yosys
only: the resources to check the model's estimates, in minutes, without an Fmax (the fastest
points are the largest designs, whose place-and-route takes much longer).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from .errors import CliError, HwgenError, Loc, plain_message

HERE = Loc("hwgen", 0)


def _cluster_errors() -> tuple:
    from concurrent.futures import CancelledError

    from distributed.scheduler import KilledWorker

    return (KilledWorker, CancelledError, OSError, TimeoutError)


def add_parser(sub) -> None:
    d = sub.add_parser("dse", help="sweep each kernel's schedules (cycle and resource models, on Dask): Pareto front")
    d.add_argument("app", metavar="APP.py")
    d.add_argument("--device", default="ecp5-85k", help="ecp5-25k, ecp5-45k, ecp5-85k (default)")
    d.add_argument("--kernel", help="only the kernel of this name")
    d.add_argument("--out", default="rtl_out", help="output folder (default rtl_out): OUT/<kernel>/dse/")
    d.add_argument("--limit", type=int, default=1000, help="schedules to sweep at most (default 1000)")
    d.add_argument("--workers", type=int, default=2, help="processes of the local Dask cluster (default 2)")
    d.add_argument("--scheduler", metavar="ADDRESS", help="an existing Dask scheduler (tcp://host:port)")
    d.add_argument("--verify", type=int, default=0, metavar="K", help="simulate the K fastest points of the front")
    d.add_argument("--synth", type=int, default=0, metavar="K", help="synthesize the K fastest points of the front")
    d.add_argument(
        "--no-place",
        action="store_true",
        help="with --synth: Yosys only (resources, no place-and-route, no Fmax)",
    )


def cmd_dse(args) -> int:
    from . import auto, dse
    from .cli import kernels_of, load_app

    _check(args)
    try:
        auto.device_of(args.device)
    except HwgenError as e:
        raise CliError(e.message.replace(" for schedule='auto'", " for --device"), HERE) from None
    module = load_app(args.app)
    kernels = kernels_of(module, args.app, args.kernel)
    for k in kernels:
        if k.mesh is not None:
            raise CliError(f"dse sweeps kernels on one PE; '{k.name}' runs on a mesh", HERE)
    with _client(args) as client:
        for k in kernels:
            started = time.perf_counter()
            try:
                result = dse.sweep(
                    os.path.abspath(args.app), k, args.device, client, args.limit, report=_progress(k.name)
                )
            except _cluster_errors() as e:  # a task that took its workers down, a lost scheduler
                raise CliError(f"the Dask cluster failed during the sweep: {plain_message(e)}", HERE) from None
            front = [p for p in result["points"] if p["front"]]
            for what, count in (("--verify", args.verify), ("--synth", args.synth)):
                if count > len(front):
                    raise CliError(f"{what} {count} is more than the {len(front)} points of the front", HERE)
            _verify(module, args, k, front[: args.verify])
            _synthesize(k, args, front[: args.synth])
            try:
                paths = dse.write(result, Path(args.out) / k.name / "dse", k.name)
            except OSError as e:
                raise CliError(f"cannot write the sweep to '{args.out}': {e.strerror or e}", HERE) from None
            _show(k, result, front, time.perf_counter() - started, paths)
    return 0


def _check(args) -> None:
    for name in ("limit", "workers"):
        if getattr(args, name) < 1:
            raise CliError(f"--{name} must be at least 1, got {getattr(args, name)}", HERE)
    for name in ("verify", "synth"):
        if getattr(args, name) < 0:
            raise CliError(f"--{name} must be 0 or more, got {getattr(args, name)}", HERE)
    if args.no_place and not args.synth:
        raise CliError("--no-place applies to --synth K (the points synthesized); give --synth too", HERE)


class _client:
    """The Dask client: a LocalCluster's, or the scheduler's at --scheduler (a CliError when
    it cannot be reached)."""

    def __init__(self, args):
        self.args, self.cluster, self.client = args, None, None

    def __enter__(self):
        import logging

        from dask.distributed import Client, LocalCluster

        logging.getLogger("distributed").setLevel(logging.ERROR)
        if self.args.scheduler:
            try:
                self.client = Client(self.args.scheduler, timeout="10s")
            except (OSError, TimeoutError, ValueError) as e:
                raise CliError(f"cannot reach the Dask scheduler at {self.args.scheduler}: {e}", HERE) from None
        else:
            try:
                self.cluster = LocalCluster(
                    n_workers=self.args.workers, threads_per_worker=1, processes=True, dashboard_address=None
                )
                self.client = Client(self.cluster)
            except Exception as e:
                raise CliError(f"cannot start a local Dask cluster: {plain_message(e)}", HERE) from None
        return self.client

    def __exit__(self, *exc):
        self.client.close()
        if self.cluster is not None:
            self.cluster.close()


def _progress(name: str, every: float = 1.0):
    """A progress line on stderr: redrawn in place on a terminal, else a line every `every`
    seconds and at the end."""
    started = time.perf_counter()
    shown = [0.0]
    tty = sys.stderr.isatty()

    def report(done: int, count: int) -> None:
        now = time.perf_counter() - started
        if done < count and now - shown[0] < (0.2 if tty else every):
            return
        shown[0] = now
        text = f"dse {name}: {done}/{count} schedules ({now:.1f} s)"
        print(f"\r{text}" if tty else text, end="" if tty and done < count else "\n", file=sys.stderr, flush=True)

    return report


def _verify(module, args, kernel, points: list) -> None:
    from .cli import app_inputs, random_inputs

    for p in points:
        k = kernel.with_schedule(tile=p["tile"], par=p["par"], metapipeline=True)  # as the sweep judged it
        inputs = app_inputs(module, k, 0, args.app) or random_inputs(k, 0)
        r = k.verify(*inputs)
        p["verified_cycles"] = r.cycles


def _synthesize(kernel, args, points: list) -> None:
    from . import auto
    from .synth import FitError, synthesize

    target, _ = auto.device_of(args.device)
    size = args.device.split("-", 1)[1]
    for p in points:
        k = kernel.with_schedule(tile=p["tile"], par=p["par"], metapipeline=True)
        try:
            r = synthesize(k.elaborate(), target, size, place=not args.no_place)
        except FitError as e:  # the estimate fitted, synthesis says otherwise: kept on the point
            p["synthesized"] = {"error": e.message}
            continue
        p["synthesized"] = {key: r[key] for key in ("luts", "ffs", "brams", "dsps", "fmax_mhz")}


def _show(kernel, result: dict, front: list, seconds: float, paths: dict) -> None:
    from .dse import schedule_text

    fits = sum(p["fits"] for p in result["points"])
    print(
        f"dse {kernel.name} on the {result['device']}: {len(result['points'])} schedules swept "
        f"(of about {result['total']}), {fits} fit, {len(front)} on the Pareto front ({seconds:.1f} s)"
    )
    for p in front:
        extra = ""
        if "verified_cycles" in p:
            extra += f"; measured {p['verified_cycles']}"
        s = p.get("synthesized")
        if s and "error" in s:
            extra += f"; synthesis: {s['error']}"
        elif s:
            fmax = f"{s['fmax_mhz']} MHz" if s["fmax_mhz"] is not None else "not placed"
            extra += f"; synthesized {s['luts']} LUTs, {s['ffs']} FFs, {s['brams']} BRAMs, {s['dsps']} DSPs, {fmax}"
        star = " (auto)" if p["auto"] else ""
        print(f"  {p['cycles']:>9} cycles  {p['luts']:>6} LUTs  {p['dsps']:>4} DSPs  {schedule_text(p)}{star}{extra}")
    mine = next((p for p in result["points"] if p["auto"]), None)
    if mine is None:
        print(f"  schedule='auto' found nothing: {result['auto_refused']}")
    elif not mine["front"]:
        print(
            f"  schedule='auto' chose {schedule_text(mine)}: {mine['cycles']} cycles, {mine['luts']} LUTs, "
            f"{mine['dsps']} DSPs (a coordinate descent; not on this front)"
        )
    print(f"  wrote {paths['json']}, {paths['csv']}, {paths['png']}")
