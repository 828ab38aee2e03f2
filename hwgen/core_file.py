"""A FuseSoC core description (CAPI2) of a built kernel, written next to its Verilog, so a
FuseSoC project can depend on the kernel as it does on any IP:

    fusesoc --cores-root rtl_out/<kernel> core-info hwgen:kernel:<module>
    fusesoc --cores-root rtl_out/<kernel> run --target lint hwgen:kernel:<module>

Targets: `default` (the Verilog and its top module, for the user's own flow) and `lint`
(Verilator's -Wall lint with the generated waivers).
"""

from __future__ import annotations


def core_file(module: str, verilog: str, waivers: str, extra: tuple = ()) -> str:
    """The `.core` text for top `module` in file `verilog` with the Verilator waivers file
    `waivers`; `extra`: other files to carry (a C header)."""
    lines = [
        "CAPI=2:",
        f"name: hwgen:kernel:{module}:{package_version()}",
        f"description: hwgen kernel {module} (generated Verilog)",
        "",
        "filesets:",
        "  rtl:",
        "    files:",
        f"      - {verilog}",
        "    file_type: verilogSource",
        "  waivers:",
        "    files:",
        f"      - {waivers}",
        "    file_type: vlt",
    ]
    if extra:
        lines += ["  headers:", "    files:"]
        lines += [f"      - {name}: {{is_include_file: true}}" for name in extra]
        lines += ["    file_type: cSource"]
    lines += [
        "",
        "targets:",
        "  default:",
        "    filesets: [rtl" + (", headers" if extra else "") + "]",
        f"    toplevel: {module}",
        "  lint:",
        "    default_tool: verilator",
        "    filesets: [rtl, waivers]",
        f"    toplevel: {module}",
        "    tools:",
        "      verilator:",
        "        mode: lint-only",
        "        verilator_options: [-Wall]",
        "",
    ]
    return "\n".join(lines)


def package_version() -> str:
    """hwgen's installed version ("0" when it is run from a source tree not installed)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("hwgen")
    except PackageNotFoundError:
        return "0"
