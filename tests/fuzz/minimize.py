"""Shrink a failing program while its failure (the same class) persists: drop results, simplify
the schedule, hoist sub-expressions over their parents, shrink extents, simplify patterns."""

from __future__ import annotations

import copy
import time

from .gen import Ex, Prog
from .run import check


def _get(h, k):
    if isinstance(h, Ex):
        return h.kids[k]
    if isinstance(h, (list, dict)):
        return h[k]
    return getattr(h, k)


def _set(h, k, v):
    if isinstance(h, Ex):
        h.kids = h.kids[:k] + (v,) + h.kids[k + 1 :]
    elif isinstance(h, (list, dict)):
        h[k] = v
    else:
        setattr(h, k, v)


def _slots(prog: Prog):
    """(holder, key) of every expression node, in a fixed order."""
    out = []

    def visit(h, k):
        e = _get(h, k)
        if not isinstance(e, Ex):
            return
        out.append((h, k))
        for i in range(len(e.kids)):
            visit(e, i)

    for p in prog.pats:
        visit(p, "body")
        for key in ("pred", "key", "where"):
            if key in p.extra:
                visit(p.extra, key)
        for i in range(len(p.extra.get("values", []))):
            visit(p.extra["values"], i)
        for pair in p.extra.get("emits", []):
            visit(pair, 0)
            if pair[1] is not None:
                visit(pair, 1)
    return out


def _size(prog: Prog, sched) -> int:
    n = sum(len(_slots(prog)) for _ in [0]) + 10 * len(prog.pats)
    n += sum(e for p in prog.pats for _, e in p.dims + p.inner)
    return n + 3 * len(sched["tile"]) + 3 * len(sched["par"]) + 2 * sched["metapipeline"]


def candidates(prog: Prog, sched: dict):
    """Smaller variants (prog, schedule), biggest cuts first."""
    if len(prog.pats) > 1:
        for j in range(len(prog.pats)):
            q = copy.deepcopy(prog)
            del q.pats[j]
            yield q, sched
    if sched["metapipeline"]:
        yield prog, dict(sched, metapipeline=False)
    for key in ("par", "tile"):
        for name in sorted(sched[key]):
            s = copy.deepcopy(sched)
            del s[key][name]
            if key == "tile":
                s["par"].pop(name, None)
            yield prog, s
    n = len(_slots(prog))
    for i in range(n):
        q = copy.deepcopy(prog)
        h, k = _slots(q)[i]
        e = _get(h, k)
        for j in range(len(e.kids)):
            q2 = copy.deepcopy(prog)
            h2, k2 = _slots(q2)[i]
            _set(h2, k2, copy.deepcopy(_get(h2, k2).kids[j]))
            yield q2, sched
        if e.op not in ("lit", "idx") and not e.kids and e.op != "ref":
            continue
        if e.op == "lit" and e.a[0] not in (0, 1):
            q2 = copy.deepcopy(prog)
            h2, k2 = _slots(q2)[i]
            _set(h2, k2, Ex("lit", (), (1,), ("w", 1, 1)))
            yield q2, sched
        if e.op == "ref":  # simpler subscripts: plain index, no offset
            subs = tuple((v, 1 if c else 0, 0 if v is not None else off) for v, c, off in e.a[1])
            if subs != e.a[1]:
                q2 = copy.deepcopy(prog)
                h2, k2 = _slots(q2)[i]
                _set(h2, k2, Ex("ref", (), (e.a[0], subs)))
                yield q2, sched
    for pi, p in enumerate(prog.pats):
        for di, (v, ext) in enumerate(p.dims + p.inner):
            for smaller in sorted({ext // 2, 2, 1}):
                if 1 <= smaller < ext:
                    q = copy.deepcopy(prog)
                    qp = q.pats[pi]
                    if di < len(qp.dims):
                        qp.dims[di] = (v, smaller)
                    else:
                        qp.inner[di - len(qp.dims)] = (v, smaller)
                    if qp.kind in ("filter", "flatmap", "groupby") and "max_keys" in qp.extra:
                        n = 1
                        for _, e in qp.dims:
                            n *= e
                        qp.extra["max_keys"] = min(256, n)
                    s = copy.deepcopy(sched)
                    s["tile"].pop(v, None)
                    s["par"].pop(v, None)
                    yield q, s
        x = p.extra
        if p.rop != "+" and p.kind in ("reduce", "mapreduce", "rowreduce", "groupby", "multifold"):
            q = copy.deepcopy(prog)
            q.pats[pi].rop = "+"
            yield q, sched
        if len(x.get("emits", [])) > 1:
            for j in range(len(x["emits"])):
                q = copy.deepcopy(prog)
                del q.pats[pi].extra["emits"][j]
                yield q, sched
        for j, (v, w) in enumerate(x.get("emits", [])):
            if w is not None:
                q = copy.deepcopy(prog)
                q.pats[pi].extra["emits"][j][1] = None
                yield q, sched
        if len(x.get("values", [])) > 2:
            for j in range(len(x["values"])):
                q = copy.deepcopy(prog)
                del q.pats[pi].extra["values"][j]
                yield q, sched
        if p.kind == "filter" and p.body is not None:
            q = copy.deepcopy(prog)
            q.pats[pi].body = None
            yield q, sched
        if p.kind == "multifold" and x.get("init"):
            q = copy.deepcopy(prog)
            q.pats[pi].extra["init"] = None
            yield q, sched


def minimize(prog: Prog, sched: dict, cls: str, seed: int, index: int, rtl: bool, budget_s=120.0, log=print, plan=None):
    """The smallest (prog, schedule) found within the time budget that still fails with `cls`."""
    t0 = time.time()
    tries = 0
    only = cls if cls in ("golden-mismatch", "loopir-mismatch", "lower-crash") else None

    def fails(q, s):
        nonlocal tries
        tries += 1
        try:
            o = check(q, seed, index, fixed_schedule=s, rtl=rtl, only=only, plan=plan)
        except Exception:  # noqa: BLE001  (a candidate the tools choke on differently)
            return False
        return o.cls == cls

    improved = True
    while improved and time.time() - t0 < budget_s:
        improved = False
        for q, s in candidates(prog, sched):
            if time.time() - t0 > budget_s:
                break
            if _size(q, s) >= _size(prog, sched):
                continue
            if fails(q, s):
                prog, sched, improved = q, s, True
                break
    log(f"  minimized in {time.time() - t0:.0f} s, {tries} tries")
    return prog, sched
