"""A user's own cocotb test against a kernel behind AXI: `hwgen sim APP.py --cocotb TEST.py`
(or `run_user_test(kernel, "TEST.py")`).

The kernel is built with `wrap="axi"` and Verilated with its AXI test top (sim/axi_harness.py);
the user's module runs in place of hwgen's testbench, its `@cocotb.test()`s seeing the test
top as `dut`, and `hwgen_sim.axi_kernel.AxiKernel` gives it the kernel: an AXI RAM holding the
arrays where hwgen placed them, and the control registers (see docs/axi.md).
"""

from __future__ import annotations

import json
import shutil
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

from hwgen_sim import harness, runner
from hwgen_sim.axi_kernel import kernel_info

from .axi_sim import build_simulator
from .build import elaborate
from .errors import HwgenError, Loc, SimulationError, user_loc


@dataclass
class UserTestResult:
    """The tests the module ran (`passed`, `failed`: names; `failures`: name -> message)."""

    passed: list = field(default_factory=list)
    failed: list = field(default_factory=list)
    failures: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return bool(self.passed) and not self.failed


def run_user_test(kernel, test_path, seed: int = 0) -> UserTestResult:
    """Run the cocotb test module at `test_path` against `kernel` behind AXI."""
    loc = user_loc()
    path = Path(test_path)
    if path.suffix != ".py" or not path.is_file():
        raise HwgenError(f"--cocotb takes a Python file of cocotb tests; '{test_path}' is not one", loc)
    if kernel.mesh is not None:
        raise HwgenError(f"--cocotb runs a single-PE kernel behind AXI; '{kernel.name}' runs on a mesh", loc)
    design = elaborate(kernel, wrap="axi")
    build_dir, _ = build_simulator(design, loc)
    work = Path(tempfile.mkdtemp(prefix=f"hwgen-{kernel.name}-cocotb-"))
    try:
        (work / "kernel.json").write_text(json.dumps(kernel_info(design, harness.Layout(design))))
        env = {"HWGEN_AXI_KERNEL": str(work / "kernel.json"), "COCOTB_RANDOM_SEED": str(seed)}
        try:
            runner.run(build_dir, work, [], env, test=path.stem, path=str(path.resolve().parent))
        except runner.ToolError as e:
            raise SimulationError(f"{e} (set HWGEN_VERBOSE=1 for the log)", loc, e.log) from None
        return _results(work / "results.xml", path)
    finally:
        shutil.rmtree(work, ignore_errors=True)


NO_TESTS = (
    "cocotb ran no test from this file: it holds no @cocotb.test(), or importing it failed "
    "(set HWGEN_VERBOSE=1 for the log)"
)


def _results(xml: Path, path: Path) -> UserTestResult:
    """The tests' outcomes from cocotb's results file; none is an error at the test file."""
    if not xml.exists():
        raise SimulationError(NO_TESTS, Loc(str(path), 0))
    out = UserTestResult()
    for case in ET.parse(xml).getroot().iter("testcase"):
        name = case.get("name", "?")
        failure = case.find("failure")
        if failure is None:
            failure = case.find("error")
        if failure is not None:
            out.failed.append(name)
            out.failures[name] = (failure.get("message") or failure.text or "failed").strip().splitlines()[0]
        elif case.find("skipped") is None:
            out.passed.append(name)
    if not out.passed and not out.failed:
        raise SimulationError(NO_TESTS, Loc(str(path), 0))
    return out
