"""Verilog identifiers for generated Verilog.

Yosys writes every name with a character other than a letter, a digit or `_`
(`\\kernel.pe0.pipe0`, `\\done$11`, `\\$1`), and every keyword, as an escaped identifier
(a backslash, the name, a space). `plain_names(text)` writes each as a plain identifier
instead (`plain_name`: `kernel_pe0_pipe0`, `done_11`, `_1`; a keyword gets a suffix).
`check_module_name` says why a kernel's name cannot name its module (hwgen/kernel.py refuses
such a kernel).
"""

from __future__ import annotations

import re

MODULE = re.compile(r"^module \\(\S+) ", re.M)  # a submodule's line: its escaped name
_ESCAPED = re.compile(r"\\(\S+)(?: |(?=\s))")  # Yosys ends each with a space of its own
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*")
_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Verilog's and SystemVerilog's keywords (IEEE 1800-2017 Annex B), which Verilator reserves
KEYWORDS = frozenset(
    """accept_on alias always always_comb always_ff always_latch and assert assign assume automatic
    before begin bind bins binsof bit break buf bufif0 bufif1 byte case casex casez cell chandle
    checker class clocking cmos config const constraint context continue cover covergroup
    coverpoint cross deassign default defparam design disable dist do edge else end endcase
    endchecker endclass endclocking endconfig endfunction endgenerate endgroup endinterface
    endmodule endpackage endprimitive endprogram endproperty endsequence endspecify endtable
    endtask enum event eventually expect export extends extern final first_match for force
    foreach forever fork forkjoin function generate genvar global highz0 highz1 if iff ifnone
    ignore_bins illegal_bins implements implies import incdir include initial inout input inside
    instance int integer interconnect interface intersect join join_any join_none large let
    liblist library local localparam logic longint macromodule matches medium modport module nand
    negedge nettype new nexttime nmos nor noshowcancelled not notif0 notif1 null or output package
    packed parameter pmos posedge primitive priority program property protected pull0 pull1
    pulldown pullup pulsestyle_ondetect pulsestyle_onevent pure rand randc randcase randsequence
    rcmos real realtime ref reg reject_on release repeat restrict return rnmos rpmos rtran
    rtranif0 rtranif1 s_always s_eventually s_nexttime s_until s_until_with scalared sequence
    shortint shortreal showcancelled signed small soft solve specify specparam static string
    strong strong0 strong1 struct super supply0 supply1 sync_accept_on sync_reject_on table
    tagged task this throughout time timeprecision timeunit tran tranif0 tranif1 tri tri0 tri1
    triand trior trireg type typedef union unique unique0 unsigned until until_with untyped use
    uwire var vectored virtual void wait wait_order wand weak weak0 weak1 while wildcard wire with
    within wor xnor xor""".split()
)


def check_module_name(name: str) -> str | None:
    """Why `name` cannot name a generated module as it is (None when it can): a module's name
    must be a plain identifier, of ASCII letters, digits and `_`, and no keyword."""
    if not _PLAIN.fullmatch(name):
        return "Verilog module names are ASCII letters, digits and '_', not starting with a digit"
    if name in KEYWORDS:
        return f"'{name}' is a Verilog keyword"
    return None


def plain_name(name: str) -> str:
    """The plain identifier `plain_names` gives an escaped Verilog name, when no other name
    of the file has it: each character other than a letter, digit or `_` becomes `_`, and
    `_` goes before a name that would start with a digit; Yosys's own names
    (`$auto$<file>:<line>:<pass>$<n>`) become `_auto_<n>`."""
    if name.startswith("$auto$"):
        return f"_auto_{name.rsplit('$', 1)[1]}"
    out = re.sub(r"[^A-Za-z0-9_]", "_", name)
    return "_" + out if out[0].isdigit() else out


def plain_names(text: str) -> str:
    """Verilog `text` with every escaped identifier written as a plain one: plain_name, or if
    that is taken or a keyword, that with `_2`, `_3`, ... appended. Module names come first,
    kept apart only from other modules' (modules and signals are named apart in Verilog), so
    a submodule's name is plain_name of its path unless two paths give one name; then every
    other name, kept apart from every word of the file. An escaped name that is a plain
    identifier already is a keyword (Yosys escapes nothing else that way). The same text
    always gives the same names."""
    names: dict = {}

    def assign(escaped: list, taken: set) -> None:
        for name in escaped:
            if name in names:
                continue
            base = candidate = plain_name(name)
            k = 1
            while candidate in taken or candidate in KEYWORDS or candidate == name:  # (a keyword)
                k += 1
                candidate = f"{base}_{k}"
            taken.add(candidate)
            names[name] = candidate

    modules = MODULE.findall(text)
    assign(modules, set(re.findall(r"^module (\w+)", text, re.M)))
    words = set(_WORD.findall(_ESCAPED.sub(" ", text))) | set(names.values())
    assign([m.group(1) for m in _ESCAPED.finditer(text)], words)
    return _ESCAPED.sub(lambda m: names[m.group(1)], text)
