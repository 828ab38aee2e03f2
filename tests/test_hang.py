"""A hung kernel names where it is stuck: the controllers that started and never finished,
with what they do and the user's line (hwgen/stalls.py)."""

import numpy as np
import pytest
from markers import line_of

import hwgen as hw
from hwgen import int32
from hwgen.build import elaborate
from hwgen.stalls import stalled


@hw.kernel(tile={"i": 16}, metapipeline=True)
def scaled(x: hw.Array[int32, 64], y: hw.Array[int32, 64]):
    return hw.map(64, lambda i: x[i] * 3 + y[i])  # L:map


def test_the_innermost_controllers_in_flight_are_named():
    tree = elaborate(scaled).component.pe.tree
    names = {}

    def visit(node):
        names[node.name] = node
        for c in node.children:
            visit(c)

    visit(tree)
    assert {"load0", "load1", "pipe0", "store0"} <= set(names)
    # the metapipeline's loads started twice and finished once; its pipe ran once, done
    timeline = {
        "load0": {"go": [2, 37], "done": [35]},
        "load1": {"go": [2, 37], "done": [34]},
        "pipe0": {"go": [37], "done": [59]},
    }
    for n in names:
        if n.startswith(("metaloop", "parallel")):
            timeline[n] = {"go": [1], "done": []}
    line = line_of(__file__, "map")
    assert stalled(tree, timeline) == [
        f"load0, loading x into the tile of 'x' (line {line})",
        f"load1, loading y into the tile of 'y' (line {line})",
    ]
    (root,) = stalled(tree, {})  # nothing recorded: only the root is known to be in flight
    assert root.startswith(tree.name + ", ")


@pytest.mark.rtl
def test_a_dram_that_stops_answering_is_a_hang_naming_the_loads(monkeypatch):
    monkeypatch.setenv("HWGEN_DRAM_STALL_AFTER", "9")
    x = np.arange(64, dtype=np.int32)
    with pytest.raises(hw.SimulationError) as e:
        scaled.simulate(x, x)
    line = line_of(__file__, "map")
    assert e.value.message.startswith("kernel 'scaled' did not finish within")
    assert e.value.message.endswith(
        f"the hardware hangs; stalled in load0, loading x into the tile of 'x' (line {line}); "
        f"load1, loading y into the tile of 'y' (line {line})"
    )
