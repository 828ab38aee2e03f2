"""python -m tests.fuzz --seed S --programs N --rtl-every K  (from the repository root)"""

from __future__ import annotations

import argparse
import sys

from .campaign import campaign


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__)
    ap.add_argument("--seed", type=int, default=0, help="campaign seed: program k of seed S is always the same")
    ap.add_argument("--programs", type=int, default=200, help="how many programs")
    ap.add_argument("--start", type=int, default=0, help="first program index (to resume or replay one)")
    ap.add_argument("--schedules", type=int, default=3, help="schedules per program (the baseline and random ones)")
    ap.add_argument("--rtl-every", type=int, default=0, help="simulate every K-th program in Verilator (0: never)")
    ap.add_argument("--minimize", type=float, default=120.0, help="seconds per finding for the minimizer (0: off)")
    ap.add_argument("--time", type=float, default=0.0, help="stop after this many seconds (0: no limit)")
    ap.add_argument(
        "--include-known",
        action="store_true",
        help="also generate the forms of the known open bugs (lift every exclusion)",
    )
    ap.add_argument("--out", default=None, help="write each minimized reproducer here (a folder)")
    a = ap.parse_args(argv)
    stats = campaign(
        a.seed,
        a.programs,
        start=a.start,
        schedules=a.schedules,
        rtl_every=a.rtl_every,
        minimize_s=a.minimize,
        time_limit=a.time,
        include_known=a.include_known,
        out=a.out,
    )
    return 1 if stats.findings else 0


if __name__ == "__main__":
    sys.exit(main())
