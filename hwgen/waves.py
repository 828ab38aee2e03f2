"""Waveforms of a simulation: what `waves=` asks for, and where the FST file is kept.

`waves=False` records nothing; `waves=True` records every clock cycle; `waves=(first, end)`
records the clock cycles first <= c < end (`end` None: to the last one), counted as
`SimResult.cycles` and the timelines count them: cycle 0 is the kernel's first cycle after
`start` (with `runs=`, of the run that is measured). Verilator writes FST into the run's folder
(sim/waves_main.cpp keeps the window); `keep` copies it to OUT/<kernel>/<kernel>.fst, which
GTKWave and Surfer open.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np

from hwgen_sim import runner
from hwgen_sim.testbench import PERIOD_NS

from .errors import HwgenError


def window(waves, loc) -> tuple | None:
    """The cycle window of a `waves=` argument that asks for waves (None: every cycle); a
    HwgenError for anything but True or (first, end) with 0 <= first < end."""
    if waves is True:
        return None

    def cycle(c) -> bool:  # a non-negative integer (numpy's too), not a bool
        return isinstance(c, (int, np.integer)) and not isinstance(c, (bool, np.bool_)) and c >= 0

    if isinstance(waves, (tuple, list)) and len(waves) == 2 and cycle(waves[0]):
        first, end = waves
        if end is None or (cycle(end) and first < end):
            return int(first), None if end is None else int(end)
    raise HwgenError(
        "waves must be True (every cycle), False, or a window of clock cycles (first, end) with "
        f"0 <= first < end (end None: to the last cycle); got {waves!r}",
        loc,
    )


def asked(waves, loc):
    """A `waves=` argument as False, True or a window (first, end); a HwgenError when bad."""
    if isinstance(waves, (bool, type(None), int)) and not waves:
        return False
    return window(waves, loc) or True


def check_reached(waves, cycles: int, name: str, loc) -> None:
    """A window that starts after the run's last cycle records nothing: a HwgenError."""
    if isinstance(waves, tuple) and waves[0] > cycles:
        raise HwgenError(
            f"the waves of kernel '{name}' start at cycle {waves[0]}, after its last ({cycles}): "
            f"the window recorded nothing; give --waves-from (waves=(first, end)) a cycle up to {cycles}",
            loc,
        )


def env(waves) -> dict:
    """The simulator's environment for `waves` (True, or a window as from `window`)."""
    if waves is True or not waves:
        return {}
    first, end = waves
    out = {"HWGEN_WAVES_FROM": str(first), "HWGEN_WAVES_PERIOD_NS": str(PERIOD_NS)}
    return out if end is None else {**out, "HWGEN_WAVES_TO": str(end)}


def keep(name: str, work: Path, out_dir) -> str:
    """Copy the run's waveform to out_dir/<kernel>/<kernel>.fst; its path."""
    dest = Path(out_dir) / name
    dest.mkdir(parents=True, exist_ok=True)
    path = dest / f"{name}.fst"
    tmp = dest / f".{name}.fst.tmp"
    shutil.copyfile(work / runner.WAVES_FILE, tmp)
    tmp.replace(path)
    return str(path)
