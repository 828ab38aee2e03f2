"""The command line: one-line errors with exit status 1, nothing half-written in the output."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import pywellen

from hwgen import cli
from hwgen.errors import show_path

GOOD = """
import hwgen as hw
from hwgen import int16

@hw.kernel(metapipeline=False)
def double(x: hw.Array[int16, 8]) -> hw.Array[int16, 8]:
    return hw.map(8, lambda i: x[i] * 2)
"""

BAD = """
import hwgen as hw
from hwgen import int16

@hw.kernel(metapipeline=False)
def broken(x: hw.Array[int16, 8]) -> hw.Array[int16, 8]:
    return hw.map(8, lambda i: x[i + 1])
"""


def run(argv, capsys):
    code = cli.main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_missing_file(capsys, tmp_path):
    path = str(tmp_path / "nothere.py")
    code, out, err = run(["build", path], capsys)
    assert code == 1 and out == ""
    assert err == f"error: {show_path(path)}: no such file\n"


def test_file_without_kernel(capsys, tmp_path):
    path = write(tmp_path, "empty.py", "X = 1\n")
    code, _, err = run(["build", path], capsys)
    assert code == 1
    assert err == f"error: {show_path(path)}: defines no @hw.kernel at module level\n"


def test_kernel_error_points_at_user_line_and_writes_nothing(capsys, tmp_path):
    path = write(tmp_path, "bad.py", BAD)
    out_dir = tmp_path / "rtl"
    code, _, err = run(["build", path, "--out", str(out_dir)], capsys)
    assert code == 1
    assert err == (
        f"error: {show_path(path)}:7: subscript 0 of 'x', i + 1, ranges over [1, 8] but "
        f"axis 0 has extent 8 (valid 0 .. 7); the access is out of bounds\n"
    )
    assert not out_dir.exists() or list(out_dir.iterdir()) == []


def test_bad_schedule_leaves_nothing(capsys, tmp_path):
    path = write(tmp_path, "tiled.py", GOOD.replace("metapipeline=False", "tile={'i': 3}"))
    out_dir = tmp_path / "rtl"
    code, _, err = run(["build", path, "--out", str(out_dir)], capsys)
    assert code == 1
    assert err == f"error: {show_path(path)}:5: tile size 3 for index 'i' does not divide its extent 8\n"
    assert not out_dir.exists() or list(out_dir.iterdir()) == []


def test_bad_arguments(capsys, tmp_path):
    code, _, err = run(["build"], capsys)
    assert code == 1 and err == "error: the following arguments are required: APP.py\n"
    code, _, err = run(["sim", "x.py", "--seed", "abc"], capsys)
    assert code == 1 and err == "error: argument --seed: invalid int value: 'abc'\n"
    path = write(tmp_path, "good.py", GOOD)
    code, _, err = run(["build", path, "--kernel", "nope"], capsys)
    assert code == 1
    assert err == f"error: {show_path(path)}: no kernel named 'nope' (it has: double)\n"


def test_build_writes_verilog_and_report(capsys, tmp_path):
    path = write(tmp_path, "good.py", GOOD)
    out_dir = tmp_path / "rtl"
    code, out, _ = run(["build", path, "--out", str(out_dir)], capsys)
    assert code == 0 and out.startswith("built double: ")
    assert sorted(p.name for p in (out_dir / "double").iterdir()) == [
        "double.core",
        "double.v",
        "double.vlt",
        "report.json",
    ]
    assert [p.name for p in out_dir.iterdir()] == ["double"]


def test_build_wrapped_in_axi(capsys, tmp_path):
    path = write(tmp_path, "good.py", GOOD)
    out_dir = tmp_path / "rtl"
    code, out, _ = run(["build", path, "--out", str(out_dir), "--wrap", "axi"], capsys)
    assert code == 0 and out.startswith(f"built double: {out_dir / 'double' / 'double_axi.v'}")
    names = sorted(p.name for p in (out_dir / "double").iterdir())
    assert names == ["double_axi.core", "double_axi.v", "double_axi.vlt", "double_regs.h", "report.json"]
    report = json.loads((out_dir / "double" / "report.json").read_text())
    assert report["axi"]["data_bits"] == 64 and report["axi"]["header"] == "double_regs.h"


@pytest.mark.rtl
def test_sim_wrapped_in_axi(capsys, tmp_path):
    path = write(tmp_path, "good.py", GOOD)
    code, out, _ = run(["sim", path, "--out", str(tmp_path / "rtl"), "--wrap", "axi", "--pause", "0.25"], capsys)
    assert code == 0 and out.startswith("PASS double (random inputs, seed 0, behind AXI, pause 0.25): measured ")
    entry = json.loads((tmp_path / "rtl" / "double" / "report.json").read_text())["simulation"]
    assert entry["wrap"] == "axi" and entry["pause"] == 0.25 and entry["cycles"] > 0


@pytest.mark.parametrize(
    "extra,message",
    [
        (["--pause", "0.5"], "--pause takes a share of cycles from 0 to 1 (below 1), with --wrap axi; got 0.5"),
        (
            ["--wrap", "axi", "--pause", "1"],
            "--pause takes a share of cycles from 0 to 1 (below 1), with --wrap axi; got 1.0",
        ),
        (
            ["--wrap", "axi", "--latency", "30"],
            "--latency, --jitter, --target and --waves apply to the native DRAM channel's simulation; with --wrap axi "
            "the memory is cocotbext-axi's AxiRam (use --pause for back-pressure)",
        ),
        (["--wrap", "axis"], "argument --wrap: invalid choice: 'axis' (choose from 'axi')"),
    ],
)
def test_sim_wrap_argument_errors(capsys, tmp_path, extra, message):
    path = write(tmp_path, "good.py", GOOD)
    code, out, err = run(["sim", path, "--out", str(tmp_path / "rtl"), *extra], capsys)
    assert code == 1 and out == "" and err == f"error: {message}\n"
    assert not (tmp_path / "rtl").exists()


def test_show_ir(capsys, tmp_path):
    path = write(tmp_path, "good.py", GOOD)
    code, out, _ = run(["build", path, "--out", str(tmp_path / "rtl"), "--show-ir"], capsys)
    assert code == 0
    assert "input x -> map0[i<8]" in out and "map0[i<8] -> result out" in out
    steps = [line.split(" (")[0] for line in out.splitlines() if line.startswith("== after ")]
    assert steps == [
        "== after " + n
        for n in ("lower", "hoist", "overlap", "metapipeline", "name", "memplan", "pipeplan", "hardware and verilog")
    ]
    assert "store store0 out_tile" in out  # controllers carry their instance names


@pytest.mark.rtl
def test_sim_with_random_inputs(capsys, tmp_path):
    path = write(tmp_path, "good.py", GOOD)
    out_dir = tmp_path / "out"
    code, out, _ = run(["sim", path, "--seed", "3", "--out", str(out_dir)], capsys)
    assert code == 0
    assert out.startswith("PASS double (random inputs, seed 3): measured ")
    report = json.loads((out_dir / "double" / "report.json").read_text())
    measured = report["simulation"]
    assert measured["cycles"] == measured["predicted_cycles"] == report["predicted_cycles"]
    assert measured["inputs"] == "random inputs, seed 3" and measured["dram"] == {"latency": 20, "jitter": 0, "seed": 3}
    assert f"  report: {out_dir / 'double' / 'report.json'}" in out
    assert (out_dir / "double" / "double.v").exists()


def test_console_script_prints_one_line(tmp_path):
    exe = os.path.join(os.path.dirname(sys.executable), "hwgen")
    proc = subprocess.run([exe, "build", str(tmp_path / "missing.py")], capture_output=True, text=True)
    assert proc.returncode == 1
    assert proc.stdout == "" and proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr


@pytest.mark.rtl
def test_sim_writes_waves(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = write(tmp_path, "good.py", GOOD)
    code, out, _ = run(["sim", path, "--waves-from", "2", "--waves-to", "5"], capsys)
    assert code == 0 and "waves: rtl_out/double/double.fst" in out
    cycles = pywellen.Waveform(str(tmp_path / "rtl_out" / "double" / "double.fst"))["hwgen_tb.cycles"]
    assert [int(v) for _, v in cycles.tv] == [2, 3, 4]  # the window, by the kernel's cycle counter
    (tmp_path / "rtl_out" / "double" / "synth-ecp5").mkdir()  # as synthesis leaves it
    code, out, _ = run(["build", path], capsys)  # a rebuild keeps the waves and synthesis results
    assert code == 0
    kept = sorted(p.name for p in (tmp_path / "rtl_out" / "double").iterdir())
    assert kept == ["double.core", "double.fst", "double.v", "double.vlt", "report.json", "synth-ecp5"]
    assert "simulation" not in json.loads((tmp_path / "rtl_out" / "double" / "report.json").read_text())


def test_bad_latency_and_inputs(capsys, tmp_path):
    path = write(tmp_path, "good.py", GOOD)
    code, _, err = run(["sim", path, "--latency", "0"], capsys)
    assert code == 1 and err == "error: --latency must be from 1 to 200 cycles, got 0\n"
    for window, shown in (
        (["--waves-from", "9", "--waves-to", "9"], "from 9, to 9"),
        (["--waves-to", "0"], "from 0, to 0"),
    ):
        code, _, err = run(["sim", path, *window, "--out", str(tmp_path / "out")], capsys)
        assert code == 1 and err == (
            f"error: --waves-from and --waves-to take clock cycles with 0 <= from < to; got {shown}\n"
        )
    code, _, err = run(["sim", path, "--waves-from", "-3"], capsys)
    assert code == 1 and err.startswith("error: --waves-from and --waves-to take clock cycles")
    assert not (tmp_path / "out").exists()
    bad = write(
        tmp_path,
        "bad_inputs.py",
        GOOD
        + """

import numpy as np


def inputs(seed=0):
    return (np.zeros(4, np.int16),)
""",
    )
    code, _, err = run(["sim", bad], capsys)
    line = open(bad).read().splitlines().index("def inputs(seed=0):") + 1
    assert code == 1
    assert err == (
        f"error: {show_path(bad)}:{line}: inputs() returned a bad argument: argument 'x' of "
        f"kernel 'double': expected an int16 array of shape (8,), got an int16 array of "
        f"shape (4,)\n"
    )


def test_sim_rejects_a_target_without_primitives(capsys, tmp_path):
    path = write(tmp_path, "good.py", GOOD)
    code, _, err = run(["sim", path, "--target", "ice40"], capsys)
    assert code == 1 and err == "error: argument --target: invalid choice: 'ice40' (choose from 'ecp5')\n"


def test_bench_rejects_an_unknown_router():
    """benchmarks/bench.py names a bad --router in one line and exits 1 before measuring."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    before = open(os.path.join(root, "docs", "results.json")).read()
    r = subprocess.run(
        [sys.executable, os.path.join(root, "benchmarks", "bench.py"), "dotproduct", "--router=router9"],
        capture_output=True,
        text=True,
        cwd=root,
        timeout=120,
    )
    assert r.returncode == 1
    assert r.stderr.strip() == "error: --router must be router1 or router2, not 'router9'"
    assert open(os.path.join(root, "docs", "results.json")).read() == before


@pytest.mark.parametrize(
    "args", [["int8:4"], ["int16:0"], ["--router=router9"], ["--seeds=one"], ["--jobs=0"], ["--freq=-5", "int16:4"]]
)
def test_fmaxpar_rejects_bad_arguments(args):
    """benchmarks/fmaxpar.py names bad cases, routers, seeds or jobs in one line and exits 1
    before synthesizing anything."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    r = subprocess.run(
        [sys.executable, os.path.join(root, "benchmarks", "fmaxpar.py"), *args],
        capture_output=True,
        text=True,
        cwd=root,
        timeout=120,
    )
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr == (
        "error: usage: fmaxpar.py [--jobs=N] [--freq=MHZ] [--seeds=S,S,...] "
        f"[--router=router1|router2] [int16:PAR | int32:PAR ...]; got: {' '.join(args)}\n"
    )


def test_show_ir_of_a_mesh_kernel_lists_its_collective(capsys, tmp_path):
    path = str(Path(__file__).resolve().parent.parent / "patterns" / "mesh" / "weight_update.py")
    code, out, _ = run(["build", path, "--out", str(tmp_path / "rtl"), "--show-ir"], capsys)
    assert code == 0
    assert "collective coll0 w -> collective0: all_gather along x" in out  # w is in DRAM: read where it is
    assert "collective coll1 partial1 -> collective1: reduce_scatter along x" in out


def test_version_and_python_dash_m(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "hwgen", "--version"], capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout == "hwgen 0.1.0\n"
    proc = subprocess.run(
        [sys.executable, "-m", "hwgen", "build", str(tmp_path / "missing.py")], capture_output=True, text=True
    )
    assert proc.returncode == 1 and proc.stderr.startswith("error: ") and proc.stderr.count("\n") == 1


def test_sim_with_a_target_records_only_into_a_build_there(capsys, tmp_path, monkeypatch):
    """--target simulates the device netlist: its measurement goes into an existing report.json
    only (the Verilog there stays the design's)."""
    from hwgen import simulate as sim_module

    class Result:
        cycles, predicted_cycles, roofline_cycles, prediction_error, roofline_efficiency = 7, 7, 5, 0.0, 0.7
        build_seconds = sim_seconds = 0.0
        waves = None

    monkeypatch.setattr(sim_module, "verify", lambda *a, **k: Result())
    path = write(tmp_path, "good.py", GOOD)
    out_dir = tmp_path / "rtl"
    code, out, _ = run(["sim", path, "--target", "ecp5", "--out", str(out_dir)], capsys)
    assert code == 0 and "report:" not in out and not out_dir.exists()
    assert run(["build", path, "--out", str(out_dir)], capsys)[0] == 0
    code, out, _ = run(["sim", path, "--target", "ecp5", "--out", str(out_dir)], capsys)
    report = json.loads((out_dir / "double" / "report.json").read_text())
    assert code == 0 and report["simulation"]["target"] == "ecp5" and report["simulation"]["cycles"] == 7


def test_sim_into_an_output_folder_that_cannot_be_written_is_one_error_line(capsys, tmp_path, monkeypatch):
    from hwgen import simulate as sim_module

    class Result:
        cycles, predicted_cycles, roofline_cycles, prediction_error, roofline_efficiency = 7, 7, 5, 0.0, 0.7
        build_seconds = sim_seconds = 0.0
        waves = None
        design = None

    monkeypatch.setattr(sim_module, "verify", lambda *a, **k: Result())
    path = write(tmp_path, "good.py", GOOD)
    blocked = tmp_path / "taken"
    blocked.write_text("a file, not a folder")
    code, _, err = run(["sim", path, "--out", str(blocked)], capsys)
    assert code == 1
    assert err.startswith(f"error: cannot write the report to '{blocked}': cannot write the output folder")
    assert err.count("\n") == 1


EXAMPLE_TEST = Path(__file__).resolve().parent.parent / "examples" / "saxpy_cocotb_test.py"
SAXPY = Path(__file__).resolve().parent.parent / "patterns" / "saxpy.py"

FAILING_TEST = """
import cocotb
import numpy as np
from hwgen_sim.axi_kernel import AxiKernel


@cocotb.test()
async def doubles(dut):
    k = await AxiKernel.attach(dut)
    k.write("x", np.arange(8, dtype=np.int16))
    await k.run()
    assert list(k.read("out")) == [0, 2, 4, 6, 8, 10, 12, 14]


@cocotb.test()
async def wrong(dut):
    k = await AxiKernel.attach(dut)
    k.write("x", np.ones(8, np.int16))
    await k.run()
    assert k.read("out")[0] == 3, "out[0] is not 3"
"""


@pytest.mark.rtl
def test_users_cocotb_example_passes(capsys):
    code, out, _ = run(["sim", str(SAXPY), "--cocotb", str(EXAMPLE_TEST)], capsys)
    assert code == 0 and out.startswith("PASS saxpy behind AXI: ") and "2 tests passed" in out


@pytest.mark.rtl
def test_users_cocotb_failure_is_reported(capsys, tmp_path):
    path = write(tmp_path, "good.py", GOOD)
    test = write(tmp_path, "my_test.py", FAILING_TEST)
    code, out, _ = run(["sim", path, "--cocotb", test], capsys)
    assert code == 1
    assert out == f"FAIL double behind AXI: {show_path(test)}: wrong: out[0] is not 3\n"


def test_users_cocotb_argument_errors(capsys, tmp_path):
    path = write(tmp_path, "good.py", GOOD)
    missing = str(tmp_path / "nope.py")
    code, out, err = run(["sim", path, "--cocotb", missing], capsys)
    assert (
        code == 1
        and err == f"error: {show_path(missing)}: --cocotb takes a Python file of cocotb tests: no such file\n"
    )
    test = write(tmp_path, "my_test.py", FAILING_TEST)
    code, out, err = run(["sim", path, "--cocotb", test, "--pause", "0.1"], capsys)
    assert code == 1 and err.startswith("error: --cocotb runs your tests against the kernel behind AXI: --latency")


MESH_APP = Path(__file__).resolve().parent.parent / "patterns" / "mesh" / "allreduce.py"


@pytest.mark.parametrize("command", [["build"], ["sim"], ["synth", "--target", "ecp5"]])
def test_wrap_of_a_mesh_app_is_refused(capsys, tmp_path, command):
    code, out, err = run(
        [command[0], str(MESH_APP), *command[1:], "--out", str(tmp_path / "rtl"), "--wrap", "axi"], capsys
    )
    assert code == 1 and out == ""
    assert err == "error: --wrap axi wraps a single-PE kernel; 'allreduce' runs on a mesh\n"
    assert not (tmp_path / "rtl").exists()


def test_users_cocotb_tests_of_a_mesh_app_are_refused(capsys, tmp_path):
    test = write(tmp_path, "my_test.py", FAILING_TEST)
    code, out, err = run(["sim", str(MESH_APP), "--cocotb", test], capsys)
    assert code == 1 and err == "error: --cocotb runs a single-PE kernel behind AXI; 'allreduce' runs on a mesh\n"


@pytest.mark.rtl
def test_users_cocotb_file_without_tests(capsys, tmp_path):
    path = write(tmp_path, "good.py", GOOD)
    test = write(tmp_path, "no_tests.py", "import cocotb\n")
    code, out, err = run(["sim", path, "--cocotb", test], capsys)
    assert code == 1 and err == (
        f"error: {show_path(test)}: cocotb ran no test from this file: it holds no @cocotb.test(), or importing it "
        "failed (set HWGEN_VERBOSE=1 for the log)\n"
    )
