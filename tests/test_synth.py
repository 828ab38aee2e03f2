"""Open-toolchain synthesis (YoWASP Yosys and nextpnr): a smoke test that the flow runs and
reports, and the error for a design too large for its device."""

import json

import numpy as np
import pytest

import hwgen as hw
from hwgen import cli, int16

pytestmark = pytest.mark.synth

N = 64


@hw.kernel(tile={"i": 16}, par={"i": 4})
def scale_add(s: int16, x: hw.Array[int16, N], y: hw.Array[int16, N]) -> hw.Array[int16, N]:
    return hw.map(N, lambda i: s * x[i] + y[i])


def test_ecp5_flow_reports_resources_and_fmax(tmp_path):
    r = scale_add.synthesize(target="ecp5", device="25k", out_dir=tmp_path)
    assert r["device"] == "ECP5 LFE5U-25F"
    assert r["luts"] > 50 and r["ffs"] > 50 and r["dsps"] >= 1
    assert r["fmax_mhz"] > 50
    report = json.loads((tmp_path / "scale_add" / "report.json").read_text())
    assert report["synthesis"]["ecp5"]["fmax_mhz"] == r["fmax_mhz"]
    assert (tmp_path / "scale_add" / "synth-ecp5" / "nextpnr.log").exists()
    np.testing.assert_array_equal(scale_add(np.int16(3), np.arange(N, dtype=np.int16), np.ones(N, np.int16)),
                                  3 * np.arange(N, dtype=np.int16) + 1)


def test_design_too_large_for_the_device(tmp_path):
    wide = scale_add.with_schedule(tile={"i": 32}, par={"i": 32})
    with pytest.raises(hw.HwgenError) as e:
        wide.synthesize(target="ice40", device="up5k", out_dir=tmp_path)
    assert type(e.value).__name__ == "FitError"
    assert e.value.message.startswith("kernel 'scale_add' does not fit the iCE40 UP5K: it needs ")
    assert "DSP blocks, the device has 8 (" in e.value.message


def test_cli_rejects_unknown_device(capsys, tmp_path):
    path = tmp_path / "app.py"
    path.write_text("import hwgen as hw\n")
    assert cli.main(["synth", str(path), "--target", "ecp5", "--device", "12k"]) == 1
    assert capsys.readouterr().err == "error: unknown ecp5 device '12k'; expected one of 25k, 45k, 85k\n"
