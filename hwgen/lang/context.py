"""The trace being recorded: the kernel's index variables and the stack of active traces.

A `Trace` is the state of tracing one kernel: the index names in use (each lambda parameter
of a pattern becomes an `ir.Dim` named after it, and schedules refer to indices by that name)
and a counter for fresh internal names. `tracing(trace)` makes a trace current for a `with`
block; `current(what)` returns the current one, or raises a TraceError naming `what` when
called outside an @hw.kernel function. Depends only on ir.py and errors.py.
"""

from __future__ import annotations

import itertools

from .. import ir
from ..errors import TraceError


class Trace:
    """The state of one kernel trace: index names in use, fresh-name counter."""

    def __init__(self, kernel_name: str):
        self.kernel_name = kernel_name
        self.extents: dict[str, int] = {}
        self.locs: dict = {}
        self.codes: dict = {}
        self.constraints: list = []  # hw.with_sharding_constraint: (array node, hw.P, loc)
        self._fresh = itertools.count()

    def new_dim(self, name: str, extent: int, loc, code=None) -> ir.Dim:
        """A new index variable. A name may come back only from the same lambda (a helper
        function traced twice): its uses share a schedule (over another extent, as the copy
        'i.n4' of 'i')."""
        if name in self.extents and code is not None and self.codes.get(name) is code:
            if self.extents[name] != extent:  # over another extent: a copy, scheduled as `name`
                name = f"{name}.n{extent}"
                self.extents.setdefault(name, extent)
            return ir.Dim(name, extent)
        if name in self.extents:
            raise TraceError(
                f"index name '{name}' is used twice in kernel '{self.kernel_name}' "
                f"(first at line {getattr(self.locs[name], 'line', '?')}); give each lambda "
                f"parameter its own name, schedules refer to indices by name",
                loc,
            )
        self.extents[name] = extent
        self.locs[name] = loc
        self.codes[name] = code
        return ir.Dim(name, extent)

    def op_dim(self, name: str, extent: int) -> ir.Dim:
        """An index of an array operation that has no lambda ('@': '@i', '@j', '@k'), named by
        the operation's rule: every such operation of the kernel shares the name, and so its
        schedule (a name no lambda parameter can have)."""
        return self.new_dim(name, extent, None, _OPERATIONS)

    def fresh_dim(self, extent: int) -> ir.Dim:
        name = f"%{next(self._fresh)}"
        self.extents[name] = extent
        return ir.Dim(name, extent)


_OPERATIONS = object()  # the "code" of op_dim's names: shared by every operation
_stack: list[Trace] = []


def current(what: str) -> Trace:
    if not _stack:
        raise TraceError(f"{what} can only be used inside an @hw.kernel function")
    return _stack[-1]


class tracing:
    """Context manager making `trace` the current trace."""

    def __init__(self, trace: Trace):
        self.trace = trace

    def __enter__(self):
        _stack.append(self.trace)
        return self.trace

    def __exit__(self, *exc):
        _stack.pop()
