"""Kernels behind AXI (`wrap="axi"`), in Verilator against cocotbext-axi's AxiRam and
AxiLiteMaster: results equal the golden model for a set of apps, with and without random
back-pressure on every AXI channel; unaligned transfers, 16-bit words and bursts at a 4 KB
page boundary; the files a wrapped build writes (C header, FuseSoC core, lint-clean Verilog);
and the errors of asking for it wrongly."""

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import load_pattern
from markers import check_error

import hwgen as hw
from hwgen import int16, int32
from hwgen.errors import HwgenError, UnsupportedError
from hwgen_sim import runner

APPS = ["dotproduct", "saxpy", "outliers", "tpchq1", "sumrows", "outerprod"]

N = 2001  # words: reads at odd offsets cross the 4 KB page at word 1024


@hw.kernel(tile={"i": 87, "j": 100})
def shifted(a: hw.Array[int32, N]) -> hw.Array[int32, N - 1]:
    """Reads one word off the bus's alignment (a[j + 1]) and backwards."""
    b = hw.map(N, lambda i: a[i] * 3)
    return hw.map(N - 1, lambda j: b[N - 1 - j] - a[j + 1])


@hw.kernel(tile={"r": 3, "c": 7})
def rows16(x: hw.Array[int16, 9, 7]) -> hw.Array[int16, 9, 7]:
    """16-bit words; rows of 7 start at every offset of a 4-word beat (masked, split writes)."""
    return hw.map((9, 7), lambda r, c: x[r, c] + c)


@pytest.mark.rtl
@pytest.mark.parametrize("name", APPS)
def test_app_behind_axi(name):
    """Bit-exact behind AXI, and within 3 % of the native channel's cycles (the AxiRam answers
    in about 2 cycles, the native DRAM model in 20; the bridge adds a few cycles of latency
    and must keep the kernel's throughput)."""
    app = load_pattern(name)
    kernel = getattr(app, name)
    r = kernel.verify(*app.inputs(0), wrap="axi")
    native = kernel.verify(*app.inputs(0))
    assert 0 < r.cycles <= 1.03 * native.cycles, (r.cycles, native.cycles)


@pytest.mark.rtl
def test_back_pressure_changes_cycles_not_results():
    app = load_pattern("saxpy")
    args = app.inputs(0)
    free = app.saxpy.verify(*args, wrap="axi")
    stalled = app.saxpy.verify(*args, wrap="axi", pause=0.3, seed=7)
    assert stalled.cycles > free.cycles


@pytest.mark.rtl
@pytest.mark.parametrize("pause", [0.0, 0.4])
def test_unaligned_reads_across_a_page(pause):
    a = np.random.default_rng(1).integers(-(2**20), 2**20, N).astype(np.int32)
    shifted.verify(a, wrap="axi", pause=pause, seed=3)


@pytest.mark.rtl
def test_sixteen_bit_words_and_split_writes():
    x = np.random.default_rng(2).integers(-1000, 1000, (9, 7)).astype(np.int16)
    r = rows16.verify(x, wrap="axi", pause=0.3, seed=1)
    assert r.design.report["axi"]["data_bits"] == 64


def test_wrapped_build_files(tmp_path):
    app = load_pattern("saxpy")
    d = app.saxpy.build(out_dir=tmp_path, wrap="axi")
    folder = tmp_path / "saxpy"
    assert sorted(p.name for p in folder.iterdir()) == [
        "report.json",
        "saxpy_axi.core",
        "saxpy_axi.v",
        "saxpy_axi.vlt",
        "saxpy_regs.h",
    ]
    axi = d.report["axi"]
    regs = {r["name"]: r["offset"] for r in axi["registers"]}
    assert regs["CTRL"] == 0 and regs["ARG_A"] == 0x20 and regs["BASE_OUT"] == 0x38
    header = (folder / "saxpy_regs.h").read_text()
    assert "#define SAXPY_BASE_X 0x28" in header and "#define SAXPY_AXI_DATA_BITS 128" in header
    assert "module saxpy_axi(" in d.verilog
    again = app.saxpy.build(out_dir=tmp_path / "again", wrap="axi")
    assert again.verilog == d.verilog
    warnings = runner.lint(d.paths["verilog"], d.paths["waivers"])
    assert "%Warning" not in warnings and "%Error" not in warnings, warnings
    native = app.saxpy.build(out_dir=tmp_path)  # beside it: the wrapped files stay
    assert (folder / "saxpy_axi.v").exists() and (folder / "saxpy.core").exists()
    assert "axi" not in native.report


FUSESOC = shutil.which("fusesoc") or str(Path(sys.executable).with_name("fusesoc"))


@pytest.mark.skipif(not Path(FUSESOC).exists(), reason="fusesoc is not installed")
def test_fusesoc_loads_the_core_and_lints_it(tmp_path):
    app = load_pattern("dotproduct")
    d = app.dotproduct.build(out_dir=tmp_path, wrap="axi")
    folder = str(Path(d.paths["core"]).parent)
    info = subprocess.run(
        [FUSESOC, "--cores-root", folder, "core-info", "hwgen:kernel:dotproduct_axi"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert info.returncode == 0 and "lint" in info.stdout, info.stdout + info.stderr
    runner.verilator_env()
    lint = subprocess.run(
        [FUSESOC, "--cores-root", folder, "run", "--build-root", str(tmp_path / "fs"), "--target", "lint"]
        + ["hwgen:kernel:dotproduct_axi"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert lint.returncode == 0, lint.stdout[-2000:] + lint.stderr[-2000:]


def test_bad_wrap_names_the_line(tmp_path):
    app = load_pattern("saxpy")
    with pytest.raises(HwgenError) as e:
        app.saxpy.build(out_dir=tmp_path, wrap="axis")  # L:wrap
    check_error(
        e.value, HwgenError, "unknown wrap 'axis'; expected one of 'axi' or None (no wrapper)", __file__, "wrap"
    )


def test_wrap_of_a_mesh_kernel_is_refused(tmp_path):
    app = load_pattern("dotproduct")  # a plain kernel: fine; a mesh one is refused
    mesh = hw.Mesh((2,), ("x",))

    @hw.kernel(mesh=mesh)
    def twice(a: hw.Array[int32, 8]) -> hw.Array[int32, 8]:
        return hw.shard_map(
            lambda b: hw.map(4, lambda i: b[i] * 2), mesh=mesh, in_specs=hw.P("x"), out_specs=hw.P("x")
        )(a)

    with pytest.raises(UnsupportedError) as e:
        twice.build(out_dir=tmp_path, wrap="axi")  # L:mesh
    check_error(
        e.value,
        UnsupportedError,
        "cannot build mesh kernel 'twice' with wrap: not supported for meshes yet",
        __file__,
        "mesh",
    )
    assert app.dotproduct.elaborate(wrap="axi").report["axi"]["module"] == "dotproduct_axi"


def test_axi_simulation_refusals():
    app = load_pattern("saxpy")
    args = app.inputs(0)
    with pytest.raises(UnsupportedError) as e:
        app.saxpy.simulate(*args, wrap="axi", waves=True)  # L:waves
    check_error(e.value, UnsupportedError, "wrap='axi' simulation does not take waves yet", __file__, "waves")
    with pytest.raises(HwgenError) as e:
        app.saxpy.simulate(*args, wrap="axi", pause=1.5)  # L:pause
    check_error(
        e.value,
        HwgenError,
        "pause must be a number in [0, 1): the share of cycles each AXI channel stalls, got 1.5",
        __file__,
        "pause",
    )
    with pytest.raises(HwgenError) as e:
        app.saxpy.simulate(*args, wrap="axi", dram=hw.DramConfig(jitter=4))  # L:jitter
    check_error(
        e.value,
        HwgenError,
        "wrap='axi' takes the memory's timing from the AXI slave (cocotbext-axi's AxiRam): leave "
        "DramConfig's latency and jitter at their defaults, and stall the AXI channels with pause=",
        __file__,
        "jitter",
    )
