"""Progress of long tool runs (Yosys, nextpnr), printed as they go.

    with progress.showing("synth dotproduct"):   # the CLI turns it on; the API stays quiet
        ... run_tool(...) ...                    # each output line goes to `line()`

While a `showing` block is active, `line(tool, text)` follows a tool's log and `stderr` gets a
status line when the stage changes and every `EVERY` seconds while it does not:

    synth dotproduct: nextpnr: placing (analytic, iteration 7), 41 s
    synth dotproduct: nextpnr: routing (9041 arcs left), 63 s

The stages are read off nextpnr's log lines (packing, analytic placement and its iterations,
annealing, routing and its remaining arcs, timing reports); Yosys runs quietly, so it shows
as running with its elapsed time. A simulation (`hwgen sim`) reports its Verilator build and
then the cycle its run has reached, read from a file the testbench rewrites (`following`):

    sim gemm: simulation: running (cycle 1200000 of about 2250000), 31 s

A report made with `quiet=S` prints nothing during its first S seconds: short runs stay silent.
"""

from __future__ import annotations

import re
import sys
import threading
import time
from contextlib import contextmanager

EVERY = 15.0  # seconds between status lines of one stage
POLL = 1.0  # seconds between looks at a running tool (`following`)

_active: list = []


class Reporter:
    def __init__(self, label: str, out=None, quiet: float = 0.0):
        self.label, self.out, self.quiet = label, out or sys.stderr, quiet
        self.started = time.perf_counter()
        self.stage, self.detail, self.shown, self.last = None, "", None, 0.0

    def line(self, tool: str, text: str) -> None:
        stage, detail = _stage(tool, text)
        if stage is not None:
            self.stage, self.detail = stage, detail
        elif self.stage is None or not self.stage.startswith(f"{tool}:"):
            self.stage, self.detail = f"{tool}: running", ""
        self.tick()

    def tick(self) -> None:
        now = time.perf_counter()
        if now - self.started < self.quiet:
            return
        if self.stage != self.shown or now - self.last >= EVERY:
            text = f"{self.label}: {self.stage}{f' ({self.detail})' if self.detail else ''}, {now - self.started:.0f} s"
            print(text, file=self.out, flush=True)
            self.shown, self.last = self.stage, now


_PATTERNS = (
    (re.compile(r"Info: Packing"), "packing", None),
    (re.compile(r"Creating initial analytic placement"), "placing (analytic)", None),
    (re.compile(r"at iteration #(\d+), type ALL"), "placing (analytic)", "iteration {0}"),
    (re.compile(r"Running simulated annealing placer"), "placing (annealing)", None),
    (re.compile(r"at iteration #(\d+): temp"), "placing (annealing)", "iteration {0}"),
    (re.compile(r"Info: Routing \d+ arcs"), "routing", None),
    (re.compile(r"^Info:\s+\d+ \|.*\|\s+(\d+)\|"), "routing", "{0} arcs left"),
    (re.compile(r"Critical path report|Max frequency"), "timing report", None),
    (re.compile(r"^cycle (\d+) of about (\d+)"), "running", "cycle {0} of about {1}"),
)


def _stage(tool: str, text: str) -> tuple:
    """(stage, detail) a log line of `tool` shows, or (None, "")."""
    for pattern, stage, detail in _PATTERNS:
        found = pattern.search(text)
        if found:
            return f"{tool}: {stage}", detail.format(*found.groups()) if detail else ""
    return None, ""


@contextmanager
def showing(label: str, out=None, quiet: float = 0.0):
    """Report the progress of the tools run inside, under `label` (nothing in the first
    `quiet` seconds)."""
    _active.append(Reporter(label, out, quiet))
    try:
        yield _active[-1]
    finally:
        _active.pop()


def active() -> bool:
    """A report is being shown."""
    return bool(_active)


def line(tool: str, text: str) -> None:
    """A line of `tool`'s output: updates the active report (if any)."""
    if _active:
        _active[-1].line(tool, text)


def heartbeat(tool: str) -> None:
    """`tool` is still running with nothing to say."""
    if _active:
        _active[-1].line(tool, "")


@contextmanager
def following(tool: str, path=None):
    """While inside, `tool` is running: every POLL seconds, and once more at the end, a line of
    its output: the last line of the file `path` (which another process rewrites), or a
    heartbeat without one. Nothing is started when no report is active."""
    if not _active:
        yield
        return
    stop = threading.Event()

    def report() -> None:
        text = ""
        if path is not None:
            try:
                text = path.read_text().strip()
            except OSError:
                pass
        line(tool, text.splitlines()[-1] if text else "")

    def poll() -> None:
        while not stop.wait(POLL):
            report()

    thread = threading.Thread(target=poll, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        report()
