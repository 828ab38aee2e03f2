"""A campaign: generate programs from a seed, check each, count, minimize findings, report."""

from __future__ import annotations

import collections
import os
import signal
import sys
import threading
import time
import warnings
from pathlib import Path

import hwgen as hw

from .gen import KNOWN_BUGS, generate
from .minimize import minimize
from .render import render
from .run import FINDINGS, check, sim_variant


class Stats:
    def __init__(self):
        self.c = collections.Counter()
        self.cov = collections.Counter()
        self.findings = []  # (cls, index, detail, reproducer source)
        self.t0 = time.time()


def coverage(prog, cov):
    cov["prog:fixed" if prog.fixed else "prog:int"] += 1
    for a in prog.arrays.values():
        cov[f"dtype:{a.dtype}"] += 1
    for s in prog.scalars.values():
        cov["scalar-param"] += 1
        cov[f"dtype:{s}"] += 1
    for p in prog.pats:
        cov[f"pattern:{p.kind}{'-2d' if len(p.dims) == 2 else ''}"] += 1
        if p.kind in ("reduce", "mapreduce", "rowreduce", "groupby", "multifold"):
            cov[f"reduce-op:{p.rop}"] += 1
        if p.kind == "matmul" and p.extra["ta"]:
            cov["expr:.T"] += 1
    if len(prog.pats) > 1:
        cov["multiple-results"] += 1
    from .minimize import _get, _slots

    for h, k in _slots(prog):
        e = _get(h, k)
        key = {"bin": lambda: e.a[0], "un": lambda: e.a[0], "cast": lambda: f"astype({e.a[0]})"}.get(
            e.op, lambda: e.op
        )()
        cov[f"expr:{key}"] += 1
        if e.op == "ref":
            for v, c, off in e.a[1]:
                form = (
                    "const"
                    if v is None
                    else ("reversed" if c == -1 else "strided" if c > 1 else "halo" if off else "plain")
                )
                cov[f"subscript:{form}"] += 1
            if e.a[0].startswith("o"):
                cov["expr:earlier-array-result"] += 1


def campaign(
    seed,
    programs,
    start=0,
    schedules=3,
    rtl_every=0,
    minimize_s=120.0,
    time_limit=0.0,
    include_known=False,
    out=None,
    log=print,
    kinds=None,
) -> Stats:
    excluded = frozenset() if include_known else frozenset(KNOWN_BUGS)
    warnings.filterwarnings("ignore", category=hw.LanesWarning)  # random lanes often exceed the DRAM's
    st = Stats()
    old = signal.signal(signal.SIGTERM, _interrupt) if threading.current_thread() is threading.main_thread() else None
    try:
        _loop(st, seed, programs, start, schedules, rtl_every, minimize_s, time_limit, excluded, out, log, kinds)
    except KeyboardInterrupt:
        log("interrupted: the counts below are for the programs finished so far")
    finally:
        if old is not None:
            signal.signal(signal.SIGTERM, old)
    report(st, seed, log)
    return st


def _interrupt(*_):
    raise KeyboardInterrupt


def _loop(st, seed, programs, start, schedules, rtl_every, minimize_s, time_limit, excluded, out, log, kinds):
    seen = collections.Counter()
    for index in range(start, start + programs):
        if index > start and (index - start) % 100 == 0:
            c = st.c
            log(
                f"... {index - start} programs, {time.time() - st.t0:.0f} s: {c['schedules']} schedules, "
                f"{c['refused']} refused, {c['verilator']} Verilator runs, findings "
                f"{sum(c[k] for k in FINDINGS)}"
            )
            sys.stdout.flush()
        if time_limit and time.time() - st.t0 > time_limit:
            log(f"time limit reached after {index - start} programs")
            break
        prog = generate(seed, index, excluded, kinds=kinds)
        coverage(prog, st.cov)
        rtl = bool(rtl_every) and index % rtl_every == 0
        o = check(prog, seed, index, n_schedules=schedules, rtl=rtl)
        for k in o.notes:
            if k[0].startswith("variant:"):
                st.cov[k[0]] += 1
        st.c["programs"] += 1
        for k, v in o.notes:
            st.c[k] += v
        if o.cls is None:
            continue
        st.c[o.cls] += 1
        seen[o.cls] += 1
        log(f"[{index}] {o.cls}: {o.detail.splitlines()[0] if o.detail else ''}")
        sched = o.schedule or {"tile": {}, "par": {}, "metapipeline": False}
        small, ssched = prog, sched
        hwcls = o.cls in ("hw-mismatch", "sim-error", "rtl-crash", "model-miss")
        plan = [o.variant] if hwcls and o.variant else None
        if minimize_s and seen[o.cls] <= 2:
            small, ssched = minimize(
                prog, sched, o.cls, seed, index, rtl=hwcls, budget_s=minimize_s, log=log, plan=plan
            )
            again = check(small, seed, index, fixed_schedule=ssched, rtl=hwcls, plan=plan)
            detail = again.detail or o.detail
        else:
            detail = o.detail
        run = o.variant if hwcls and o.variant else ("plain", sim_variant(seed, index)[1], 0)
        src = render(small, ssched, variant=run[:2], input_seed=small.input_seed + run[2])
        st.findings.append((o.cls, index, detail, src))
        log(f"---- finding {o.cls}, seed {seed} program {index}: {detail}\n" + _kernel_part(src))
        if out:
            Path(out).mkdir(parents=True, exist_ok=True)
            (Path(out) / f"{o.cls}_s{seed}_p{index}.py").write_text(src)
        sys.stdout.flush()


def _kernel_part(src: str) -> str:
    """The interesting lines of a reproducer: schedule, kernel, reference, inputs."""
    return src[src.index("SCHEDULE =") : src.index("if __name__")].rstrip() + "\n"


def report(st: Stats, seed, log=print):
    c = st.c
    wall = time.time() - st.t0
    rows = [
        ("seed", seed),
        ("programs", c["programs"]),
        ("wall time (s)", f"{wall:.0f}"),
        ("rejected at trace (generator/hwgen disagree on legality)", c["trace-rejected"] + c["golden-refused"]),
        ("reference errors (generator bugs)", c["ref-error"]),
        ("schedules tried", c["schedules"]),
        ("refused (HwgenError)", c["refused"]),
        ("excluded (known bugs)", sum(v for k, v in c.items() if k.startswith("excluded:"))),
        ("programs through Verilator (builds)", c["verilator"]),
        ("  all simulations passed", c["verilator-pass"]),
        ("simulations (each build also runs other inputs)", c["simulations"]),
        ("  with DRAM jitter (cycles not compared)", c["variant:jitter"]),
        ("  run twice without a reset", c["variant:runs2"]),
    ] + [(f"finding: {k}", c[k]) for k in FINDINGS]
    w = max(len(r[0]) for r in rows)
    log("\n==== fuzz summary")
    for k, v in rows:
        log(f"  {k:<{w}}  {v}")
    log("  coverage:")
    groups = collections.defaultdict(list)
    for k, v in sorted(st.cov.items()):
        g, _, name = k.partition(":")
        groups[g].append(f"{name or g}={v}")
    for g, items in groups.items():
        log(f"    {g}: " + ", ".join(items))
    tops = [(k, v) for k, v in c.most_common() if k.startswith(("refuse:", "reject:", "referr:", "excluded:"))]
    if tops:
        log("  refusals and rejections, most common first:")
        for k, v in tops[:25]:
            log(f"    {v:5d}  {k}")
    if os.environ.get("HWGEN_FUZZ_JSON"):
        import json

        Path(os.environ["HWGEN_FUZZ_JSON"]).write_text(
            json.dumps({"counts": dict(c), "coverage": dict(st.cov), "wall_s": wall}, indent=1)
        )
