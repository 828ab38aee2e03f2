"""Which device's primitives the design being built instantiates.

    with primitives("ecp5"): ...   build multipliers and block RAMs as ECP5 primitives
    current() -> "ecp5" | None     None: the generic design (simulates anywhere)

Set by build.elaborate(kernel, target=...) for synthesis; the generic design is the default.
Templates that have a device form (hw/dsp.py, hw/bram.py) ask current() while elaborating.
"""

from __future__ import annotations

import contextlib
import contextvars

TARGETS = ("ecp5",)
# on a register: synthesis must not merge it with its identical twins (hwgen/synth.py)
KEEP = {"keep": 1}
_target = contextvars.ContextVar("hwgen_device_target", default=None)


@contextlib.contextmanager
def primitives(target: str | None):
    """Build with `target`'s primitives inside this block (None, or a target without
    primitives: the generic design)."""
    token = _target.set(target if target in TARGETS else None)
    try:
        yield
    finally:
        _target.reset(token)


def current() -> str | None:
    return _target.get()
