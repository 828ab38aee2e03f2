"""The generated Verilog's names and source attributes: no escaped identifiers, and each
unit's module names the user's lines it implements (hwgen/verilog.py, hw/sources.py)."""

import inspect
import re
from pathlib import Path

import numpy as np
import pytest

import hwgen as hw
from hwgen import int32
from hwgen.verilog_names import plain_name, plain_names

ROOT = Path(__file__).resolve().parent.parent


def _line(fn, text: str) -> int:
    """The line of source file of `fn` holding `text`."""
    lines, start = inspect.getsourcelines(fn)
    return start + next(k for k, line in enumerate(lines) if text in line)


def _attributes(verilog: str) -> dict:
    """Module name -> its src attribute."""
    return dict((m, s) for s, m in re.findall(r'\(\* src = "([^"]*)" \*\)\nmodule (\w+)', verilog))


def test_plain_name_forms():
    assert plain_name("k.pe0.pipe0") == "k_pe0_pipe0"
    assert plain_name("done$11") == "done_11"
    assert plain_name("$1") == "_1"
    assert plain_name("0x") == "_0x"
    assert plain_name("$auto$verilog_backend.cc:2355:dump_module$7") == "_auto_7"


def test_plain_names_keep_names_apart():
    text = "wire \\a.b ;\nwire a_b;\nwire \\a$b ;\nassign \\a.b  = \\a$b ;\nwire \\begin ;\nwire \\logic ;\n"
    out = plain_names(text)
    assert "\\" not in out
    assert out == "wire a_b_2;\nwire a_b;\nwire a_b_3;\nassign a_b_2 = a_b_3;\nwire begin_2;\nwire logic_2;\n"


def test_a_module_keeps_its_plain_name_beside_a_signal_of_that_name():
    # a kernel 'base' with an array 'axi_kernel': the port base_axi_kernel and the AXI
    # wrapper's submodule base_axi.kernel (modules and signals are named apart in Verilog)
    text = (
        "module base_axi(base_axi_kernel);\n  input base_axi_kernel;\n  \\base_axi.kernel  kernel (\n  );\n"
        "endmodule\n\nmodule \\base_axi.kernel (x);\nendmodule\n"
    )
    out = plain_names(text)
    assert "module base_axi_kernel(x);" in out and "  base_axi_kernel kernel (" in out
    assert plain_name("base_axi.kernel") == "base_axi_kernel"  # the name synthesis looks for


@pytest.mark.parametrize(
    "name, why",
    [
        ("table", "'table' is a Verilog keyword"),
        ("logic", "'logic' is a Verilog keyword"),
        ("dé", "Verilog module names are ASCII letters"),
    ],
)
def test_a_kernel_whose_name_cannot_name_a_module_is_refused(name, why):
    source = f"def {name}(a: hw.Array[int32, 8]):\n    return hw.map(8, lambda i: a[i] + 1)\n"
    scope = {"hw": hw, "int32": int32}
    exec(compile(source, "app.py", "exec"), scope)
    with pytest.raises(hw.HwgenError, match=f"kernel '{name}' cannot name its Verilog module: {why}") as e:
        hw.kernel(scope[name])
    assert "rename the function" in str(e.value)


def test_src_text_quotes_nothing_that_ends_a_verilog_string():
    from hwgen.errors import Loc
    from hwgen.hw.sources import src_text

    assert (
        src_text([Loc('/x/we"ird\\.py', 3), None, Loc("/y/app.py", 4), Loc("/y/app.py", 4)]) == "we_ird_.py:3|app.py:4"
    )


def kernel_with_two_patterns():
    @hw.kernel(tile={"i": 16, "j": 16})
    def two(a: hw.Array[int32, 64], b: hw.Array[int32, 64]):
        s = hw.map(64, lambda i: a[i] + b[i])  # SUM
        return hw.map(64, lambda j: s[j] * 3)  # SCALE

    return two


def test_units_carry_the_users_lines():
    k = kernel_with_two_patterns()
    design = k.elaborate()
    verilog = design.verilog
    assert "\\" not in verilog  # no escaped identifier anywhere
    attrs = _attributes(verilog)
    fn = kernel_with_two_patterns
    here = Path(__file__).name
    sum_line, scale_line = f"{here}:{_line(fn, '# SUM')}", f"{here}:{_line(fn, '# SCALE')}"
    assert attrs["two_pe0_pipe0"] == scale_line  # the maps fused: the pipe writes the second's result
    assert attrs["two_pe0_load0"] == attrs["two_pe0_mem_a_tile0"] == sum_line  # a, read by the first map
    assert any(m.startswith("two_pe0_store") and s == scale_line for m, s in attrs.items())
    root = next(s for m, s in attrs.items() if m == "two_pe0_seqloop0")
    assert root.split("|") == [sum_line, scale_line]
    tree = design.report["controllers"]  # the same lines, unit by unit, in the report
    assert tree["unit"] == "seqloop0" and tree["src"] == root
    units = {}
    stack = [tree]
    while stack:
        e = stack.pop()
        units[e["unit"]] = e.get("src")
        stack += e.get("stages", []) + e.get("parallel", [])
    assert units["pipe0"] == scale_line and units["load0"] == sum_line


def test_wrapped_and_mesh_verilog_have_no_escaped_names():
    k = kernel_with_two_patterns()
    wrapped = k.elaborate(wrap="axi").verilog
    assert "\\" not in wrapped and "two_axi_kernel_pe0_pipe0" in _attributes(wrapped)
    mesh = hw.Mesh((2,), ("x",), topology="ring")

    @hw.kernel(mesh=mesh)
    def ring(a: hw.Array[int32, 64]):
        return hw.shard_map(
            lambda b: hw.psum(hw.map(32, lambda i: b[i] + 1), "x"), mesh=mesh, in_specs=hw.P("x"), out_specs=hw.P()
        )(a)

    verilog = ring.elaborate().verilog
    assert "\\" not in verilog and "module ring_pe_pe0_ring0(" in verilog


@pytest.mark.rtl
def test_renamed_verilog_simulates():
    k = kernel_with_two_patterns()
    a, b = np.arange(64, dtype=np.int32), np.arange(64, dtype=np.int32) * 5
    k.verify(a, b)
