"""Errors raised to users, each pointing at the user's own file and line.

Every user mistake raises a subclass of `HwgenError`. Its `message` names the offending value
and says what was expected; `file` and `line` point at the user's source (the innermost stack
frame outside the hwgen package, or the source location recorded on an IR node when the
mistake is found later, during a build). `str(err)` is ``FILE:LINE: message``.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass

_PACKAGE_DIRS = tuple(
    os.path.dirname(os.path.abspath(p)) + os.sep
    for p in (__file__, os.path.join(os.path.dirname(__file__), "..", "sim", "x"))
)


_PYTHON_LIBS = tuple(os.path.join(prefix, "lib") + os.sep for prefix in {sys.prefix, sys.base_prefix, sys.exec_prefix})
_SCRIPTS = tuple(os.path.join(prefix, "bin") + os.sep for prefix in {sys.prefix, sys.base_prefix})


@dataclass(frozen=True)
class Loc:
    """A place in the user's source."""

    file: str
    line: int

    def __str__(self) -> str:
        return f"{show_path(self.file)}:{self.line}"


def show_path(path: str) -> str:
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel


def _is_internal(filename: str) -> bool:
    absolute = os.path.abspath(filename)
    if absolute.startswith(_PACKAGE_DIRS):
        return True
    # Frames of Python itself and of installed libraries (numpy, functools) are not the user's.
    if "site-packages" in absolute or absolute.startswith(_PYTHON_LIBS + _SCRIPTS):
        return True
    return filename.startswith("<frozen") or filename == "<string>"


def user_loc(depth_limit: int = 200) -> Loc | None:
    """The innermost stack frame that belongs to the user (outside hwgen and libraries)."""
    frame = sys._getframe(1)
    for _ in range(depth_limit):
        if frame is None:
            return None
        if not _is_internal(frame.f_code.co_filename):
            return Loc(frame.f_code.co_filename, frame.f_lineno)
        frame = frame.f_back
    return None


def loc_from_traceback(tb) -> Loc | None:
    """The innermost user frame of a traceback (for exceptions raised inside user lambdas)."""
    found = None
    while tb is not None:
        if not _is_internal(tb.tb_frame.f_code.co_filename):
            found = Loc(tb.tb_frame.f_code.co_filename, tb.tb_lineno)
        tb = tb.tb_next
    return found


_INTERNAL_NAMES = (
    (re.compile(r"\bArrayVal\b|\bTableVal\b"), "traced array"),
    (re.compile(r"\bVal\b"), "traced scalar"),
    (re.compile(r"\b(map|sum|max|min|filter|abs)_\(\)"), r"hw.\1()"),
    (re.compile(r"\b(groupby_fold|multifold|flatmap|reduce|argmax|argmin|where|table|zeros|full)\(\)"), r"hw.\1()"),
)
_PLAIN = {
    "KeyError": "there is no key {0}",
    "ZeroDivisionError": "{0} (a division by zero in Python code)",
    "RecursionError": "Python recursed too deeply",
}


def plain_message(e: BaseException) -> str:
    """A Python exception raised in the user's code as a plain sentence: its message without
    the exception's class name and with hwgen's internal class names replaced."""
    text = str(e)
    template = _PLAIN.get(type(e).__name__)
    if template is not None:
        text = template.format(text)
    if not text:
        text = "Python raised an error without a message"
    for pattern, words in _INTERNAL_NAMES:
        text = pattern.sub(words, text)
    return text.splitlines()[0] if text.strip() else text


class HwgenError(Exception):
    """A mistake in the user's program, schedule, inputs or command line."""

    def __init__(self, message: str, loc: Loc | None = None):
        self.message = message
        self.loc = loc if loc is not None else user_loc()
        super().__init__(str(self))

    @property
    def file(self) -> str | None:
        return self.loc.file if self.loc else None

    @property
    def line(self) -> int | None:
        return self.loc.line if self.loc else None

    def __str__(self) -> str:
        return f"{self.loc}: {self.message}" if self.loc else self.message


class TraceError(HwgenError):
    """The kernel's Python code cannot be traced into patterns."""


class TypeMismatchError(HwgenError):
    """A dtype or shape does not match what the kernel declares or numpy allows."""


class ScheduleError(HwgenError):
    """A schedule (tile, par, metapipeline) is malformed or cannot be applied."""


class UnsupportedError(HwgenError):
    """A legal program that this version of the compiler cannot turn into hardware yet."""


class SimulationError(HwgenError):
    """The simulator could not be built or run, or the hardware reported a fault.
    `log` holds the tail of the tool's output, if any."""

    def __init__(self, message: str, loc: Loc | None = None, log: str = ""):
        self.log = log
        super().__init__(message, loc)


class CapacityError(HwgenError):
    """A run-time limit was exceeded: more distinct keys than a group-by's max_keys. The golden
    model raises it, and simulation raises it when the hardware flags it."""


class IndexRangeError(HwgenError):
    """A subscript computed from data left its array at run time (numpy's IndexError): a
    multifold's target. The golden model raises it, and simulation when the hardware flags it."""


class MismatchError(HwgenError):
    """The hardware's output differs from the golden model.

    Names the output, the first differing index, and the expected and actual values.
    """

    def __init__(self, message: str, output: str, index, expected, actual, loc: Loc | None = None):
        self.output = output
        self.index = index
        self.expected = expected
        self.actual = actual
        super().__init__(message, loc)


class CliError(HwgenError):
    """Bad command-line arguments or an app file the CLI cannot use."""


class LanesWarning(UserWarning):
    """A schedule whose parallel lanes the DRAM cannot feed: the kernel is memory-bound, so
    fewer lanes give the same cycles with fewer banks and a faster build."""
