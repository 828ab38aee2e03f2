"""Running one program: load its source, reference vs golden model, the loop IR under random
schedules, and (for a sample) Verilator, classifying every outcome."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import random
import tempfile
import traceback
from pathlib import Path

import numpy as np

import hwgen as hw
from hwgen import loop_interp
from hwgen.build import loop_program
from hwgen.lang.signature import check_args, to_user
from hwgen.simulate import simulate

from .gen import Prog
from .render import render

WORK = Path(os.environ.get("HWGEN_FUZZ_DIR", Path(tempfile.gettempdir()) / "hwgen-fuzz"))

# Finding classes. "refused" (a HwgenError for a schedule or program the compiler does not
# support) is not a finding; any other exception where a HwgenError is expected is.
FINDINGS = [
    "golden-mismatch",
    "golden-crash",
    "loopir-mismatch",
    "lower-crash",
    "hw-mismatch",
    "sim-error",
    "rtl-crash",
    "model-miss",
]


class Outcome:
    def __init__(self):
        self.cls = None  # the first finding's class, or None
        self.detail = ""
        self.schedule = None
        self.notes = []  # (counter, value) pairs for the statistics
        self.variant = None  # the last Verilator run: (variant, DRAM settings, input-seed offset)

    def finding(self, cls, detail, schedule=None):
        if self.cls is None:
            self.cls, self.detail, self.schedule = cls, detail, schedule

    def note(self, key, value=1):
        self.notes.append((key, value))


def load(source: str, name: str):
    """Import `source` from a file (so tracebacks and hwgen's error locations show its lines)."""
    WORK.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha1(source.encode()).hexdigest()[:10]
    path = WORK / f"{name}_{digest}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(f"fuzzprog_{name}_{digest}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _tuple(x):
    return x if isinstance(x, tuple) else (x,)


def differ(got, want) -> str:
    """'' when equal in dtype, shape and value; else a description of the first difference."""
    got, want = _tuple(got), _tuple(want)
    if len(got) != len(want):
        return f"{len(got)} results, expected {len(want)}"
    for k, (g, w) in enumerate(zip(got, want)):
        g, w = np.asarray(g), np.asarray(w)
        if g.dtype != w.dtype:
            return f"result {k}: dtype {g.dtype}, expected {w.dtype}"
        if g.shape != w.shape:
            return f"result {k}: shape {g.shape}, expected {w.shape}"
        if not np.array_equal(g, w):
            idx = tuple(int(i) for i in np.argwhere(g != w)[0]) if g.ndim else ()
            return f"result {k}: at {idx} got {g[idx]!r}, expected {w[idx]!r}"
    return ""


def _divisors(n):
    return [d for d in range(1, n + 1) if n % d == 0]


def random_schedule(r: random.Random, kernel, prog: Prog) -> dict:
    """Tiles dividing each extent, lanes dividing each tile (at most 8), metapipelining."""
    # the schedulable names: no internal '%' names, no renamed copies ('@k.n8' is scheduled as '@k')
    extents = {k: v for k, v in kernel.program.extents.items() if not k.startswith("%") and "." not in k}
    collect = {v for p in prog.pats if p.kind in ("filter", "flatmap", "groupby") for v, _ in p.dims}
    tile, par = {}, {}
    for name, extent in sorted(extents.items()):
        if r.random() < 0.3:
            continue
        t = r.choice(_divisors(extent))
        if t > 1:
            tile[name] = t
            lanes = [d for d in _divisors(t) if d <= 8]
            if r.random() < (0.1 if name in collect else 0.5):
                p = r.choice(lanes)
                if p > 1:
                    par[name] = p
    return {"tile": tile, "par": par, "metapipeline": r.random() < 0.6}


def sim_variant(seed, index):
    """How program `index` runs in Verilator: (variant, DRAM settings). Most runs on the default
    DRAM or another latency and width, where cycles must match the model; some twice without a
    reset ("runs2"); some with random jitter (extra latency, refused beats; cycles not compared)."""
    r = random.Random(seed * 31 + index + 1)
    x = r.random()
    variant = "plain" if x < 0.6 else "runs2" if x < 0.8 else "jitter"
    dram = {"latency": 20, "words_per_cycle": 4, "jitter": 0}
    if variant != "plain" or r.random() < 0.5:
        dram.update(latency=r.choice([1, 2, 5, 20, 60]), words_per_cycle=r.choice([1, 2, 4, 8]))
    if variant == "jitter":
        dram["jitter"] = r.choice([1, 3, 7, 30])
    return variant, dram


def sim_plan(seed, index, extra=True):
    """The simulations of program `index`: (variant, DRAM settings, input-seed offset). The first
    is `sim_variant`; the others reuse its Verilator build (the DRAM's latency and jitter and
    the runs are run-time settings) on other inputs: one with jitter, one twice without a reset."""
    variant, dram = sim_variant(seed, index)
    plan = [(variant, dram, 0)]
    if extra:
        r = random.Random(seed * 37 + index + 2)
        jit = dict(dram, latency=r.choice([1, 3, 20, 45]), jitter=r.choice([2, 5, 17, 40]))
        plan.append(("jitter", jit, 1))
        plan.append(("runs2", dict(dram, latency=r.choice([1, 7, 20]), jitter=0), 2))
    return plan


def check(
    prog: Prog,
    seed: int,
    index: int,
    n_schedules=2,
    rtl=False,
    fixed_schedule=None,
    only=None,
    plan=None,
) -> Outcome:
    """Everything for one program. fixed_schedule: check only that schedule (the minimizer);
    only: stop at the stage that gives this finding class."""
    out = Outcome()
    source = render(prog, variant=sim_variant(seed, index))
    try:
        mod = load(source, prog.name)
    except hw.HwgenError as e:
        out.note("trace-rejected")
        out.note("reject:" + _first_words(e))
        return out
    except Exception as e:  # noqa: BLE001
        out.finding("golden-crash", f"tracing: {type(e).__name__}: {e}\n{_tb()}")
        return out
    args = mod.inputs()
    try:
        with np.errstate(all="ignore"):
            want = mod.reference(*args)
    except Exception as e:  # noqa: BLE001
        out.note("ref-error")
        out.note(f"referr:{type(e).__name__}: {str(e)[:60]}")
        return out
    try:
        golden = mod.kernel(*args)
    except hw.HwgenError as e:
        out.note("golden-refused")
        out.note("reject:" + _first_words(e))
        return out
    except Exception as e:  # noqa: BLE001
        out.finding("golden-crash", f"golden model: {type(e).__name__}: {e}\n{_tb()}")
        return out
    d = differ(golden, want)
    if d:
        out.finding("golden-mismatch", d)
        return out
    if only == "golden-mismatch":
        return out
    kernel = mod.kernel
    r = random.Random(seed * 7919 + index)
    schedules = (
        [fixed_schedule]
        if fixed_schedule is not None
        else [{"tile": {}, "par": {}, "metapipeline": False}]
        + [random_schedule(r, kernel, prog) for _ in range(n_schedules - 1)]
    )
    accepted = []
    for sched in schedules:
        out.note("schedules")
        try:
            k = kernel.with_schedule(**sched)
            lp = loop_program(k)
        except hw.HwgenError as e:
            out.note("refused")
            out.note("refuse:" + _first_words(e))
            continue
        except Exception as e:  # noqa: BLE001
            out.finding("lower-crash", f"{type(e).__name__}: {e}\n{_tb()}", sched)
            return out
        try:
            res = loop_interp.run(lp, check_args(k.name, k.params, args))
            got = tuple(to_user(p, res[p.name]) for p in k.results)
        except Exception as e:  # noqa: BLE001
            out.finding("lower-crash", f"loop interpreter: {type(e).__name__}: {e}\n{_tb()}", sched)
            return out
        d = differ(got if len(got) > 1 else got[0], golden)
        if d:
            out.finding("loopir-mismatch", d, sched)
            return out
        accepted.append((sched, k))
    if not rtl or not accepted or only in ("loopir-mismatch", "lower-crash"):
        return out
    sched, k = accepted[-1]
    out.note("verilator")
    for run in plan or sim_plan(seed, index):
        variant, dram, offset = run
        if offset:
            args_n = mod.inputs(prog.input_seed + offset)
            try:
                golden_n = mod.kernel(*args_n)
            except hw.HwgenError:
                continue
        else:
            args_n, golden_n = args, golden
        out.note("simulations")
        out.note("variant:" + variant)
        out.variant = run
        try:
            sim = simulate(
                k, args_n, dram=hw.DramConfig(**dram), seed=index + offset, runs=2 if variant == "runs2" else 1
            )
        except hw.SimulationError as e:
            out.finding("sim-error", str(e), sched)
            return out
        except hw.HwgenError as e:
            out.note("refused")
            out.note("verilator-refused")
            out.note("refuse:" + _first_words(e))
            return out
        except Exception as e:  # noqa: BLE001
            out.finding("rtl-crash", f"{type(e).__name__}: {e}\n{_tb()}", sched)
            return out
        d = differ(sim.outputs, golden_n)
        if d:
            out.finding("hw-mismatch", d, sched)
            return out
        out.note("simulation-pass")
        if variant != "jitter" and sim.cycles != sim.predicted_cycles:  # the model is exact at fixed latency
            out.finding("model-miss", f"measured {sim.cycles} cycles, predicted {sim.predicted_cycles}", sched)
            return out
    out.note("verilator-pass")
    return out


def _first_words(e: Exception) -> str:
    msg = getattr(e, "message", str(e))
    return f"{type(e).__name__}: " + " ".join(msg.split()[:7])


def _tb() -> str:
    lines = traceback.format_exc().strip().splitlines()
    return "\n".join(lines[-6:])
