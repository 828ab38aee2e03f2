"""Counter chains: row-major nests of counters, the last one moving fastest.

A chain is a list of (value, extent) pairs; values count 0 .. extent-1.
"""

from __future__ import annotations

from amaranth.hdl import Mux


def all_at_end(chain):
    """True when every counter of the chain holds its last value (the chain's last step)."""
    cond = 1
    for value, extent in chain:
        cond = cond & (value == extent - 1)
    return cond


def next_values(chain) -> list:
    """The chain's values one step later (wrapping to all zeros after the last step)."""
    out = []
    carry = 1
    for value, extent in reversed(chain):
        wrap = value == extent - 1
        out.append(Mux(carry, Mux(wrap, 0, value + 1), value))
        carry = carry & wrap
    return list(reversed(out))


def port_name(name: str) -> str:
    """A counter or parameter name as a Verilog-friendly identifier ('%0' -> 'x0', '@k.t' ->
    'op_k_t')."""
    return name.replace(".", "_").replace("%", "x").replace("@", "op_")


def check_port_names(names) -> None:
    """Counter names must stay apart as Verilog names (an index the user named 'op_k' and the
    '@k' of an '@' would both be 'op_k'): an UnsupportedError naming the pair otherwise."""
    from ..errors import UnsupportedError

    seen: dict = {}
    for name in sorted(set(names)):
        other = seen.setdefault(port_name(name), name)
        if other != name:
            a, b = (other.split(".")[0], name.split(".")[0])
            raise UnsupportedError(
                f"index names '{a}' and '{b}' give the same Verilog name '{port_name(name)}'; rename index "
                f"'{a if not a.startswith(('@', '%')) else b}'"
            )
