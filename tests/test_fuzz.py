"""A small differential-fuzzing campaign (tests/fuzz, docs/fuzzing.md): random programs over the
pattern language, checked against an independent numpy reference, the golden model, the loop IR
under random schedules, and for a few of them Verilator. The forms of the known open bugs
(tests/fuzz/gen.py KNOWN_BUGS, each named in docs/fuzzing.md) are not generated."""

import pytest
from fuzz.campaign import campaign
from fuzz.run import FINDINGS

GOLDEN_ONLY = FINDINGS[:4]


def _clean(stats, classes):
    found = [f for f in stats.findings if f[0] in classes]
    assert not found, "\n\n".join(f"{c} in program {i}: {d}\n{src}" for c, i, d, src in found)


def test_fuzz_golden_and_loop_ir():
    stats = campaign(seed=2024, programs=30, schedules=3, rtl_every=0, minimize_s=20, log=lambda *a: None)
    assert stats.c["programs"] == 30
    assert stats.c["schedules"] > 30
    _clean(stats, GOLDEN_ONLY)


@pytest.mark.rtl
def test_fuzz_verilator():
    # two small programs of one result each (a map and a filter) through Verilator
    stats = campaign(seed=1, programs=2, schedules=2, rtl_every=1, minimize_s=0, log=lambda *a: None)
    assert stats.c["verilator"] == 2
    _clean(stats, FINDINGS)
