"""schedule="auto" (hwgen/auto.py): the schedule chosen from the cycle and resource models, its
record in report.json, and its errors."""

import json

import numpy as np
import pytest
from markers import check_error

import hwgen as hw
from hwgen import cli, int32
from hwgen.errors import ScheduleError

N = 32


def body(a, b):
    return hw.map((N, N), lambda i, j: hw.sum(N, lambda k: a[i, k] * b[k, j]))


@hw.kernel(schedule="auto", device="ecp5-25k")
def mm_auto(a: hw.Array[int32, N, N], b: hw.Array[int32, N, N]) -> hw.Array[int32, N, N]:
    return body(a, b)


@hw.kernel(tile={"i": 16, "j": 16, "k": 32}, par={"j": 8})
def mm_hand(a: hw.Array[int32, N, N], b: hw.Array[int32, N, N]) -> hw.Array[int32, N, N]:
    return body(a, b)


def test_auto_finds_a_schedule_no_slower_than_a_hand_written_one_within_the_device():
    why = mm_auto.auto
    hand = mm_hand.elaborate().report["predicted_cycles"]
    assert why["device"] == "ecp5-25k"
    assert why["predicted_cycles"] <= hand
    assert 5 < why["tried"] <= 400  # (its time is measured by benchmarks/auto.py, not here)
    for r, v in why["resources"].items():
        assert v["estimate"] <= v["limit"] <= v["device"], r
    assert mm_auto.schedule.par  # lanes were worth it


def test_auto_is_deterministic_and_recorded_in_the_report(tmp_path):
    again = mm_hand.with_schedule("auto", device="ecp5-25k")
    assert again.schedule == mm_auto.schedule
    design = mm_auto.build(str(tmp_path))
    report = json.loads(open(design.paths["report"]).read())
    assert report["auto"]["predicted_cycles"] == report["predicted_cycles"] == mm_auto.auto["predicted_cycles"]
    assert report["schedule"]["tile"] == mm_auto.schedule.tile


def test_a_larger_device_never_gets_a_slower_schedule():
    small = mm_hand.with_schedule("auto", device="ecp5-25k").auto["predicted_cycles"]
    large = mm_hand.with_schedule("auto", device="ecp5-85k").auto["predicted_cycles"]
    assert large <= small


@pytest.mark.rtl
def test_the_auto_schedule_runs_as_predicted():
    rng = np.random.default_rng(1)
    a, b = (rng.integers(-1000, 1000, (N, N)).astype(np.int32) for _ in range(2))
    r = mm_auto.verify(a, b)
    assert r.cycles == r.predicted_cycles == mm_auto.auto["predicted_cycles"]


def test_the_cli_says_what_auto_chose(tmp_path, capsys):
    app = tmp_path / "app.py"
    app.write_text(
        "import hwgen as hw\nfrom hwgen import int32\n\n"
        '@hw.kernel(schedule="auto")\n'
        "def scale(x: hw.Array[int32, 4096]) -> hw.Array[int32, 4096]:\n"
        "    return hw.map(4096, lambda i: x[i] * 3 + 1)\n"
    )
    assert cli.main(["build", str(app), "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("auto schedule for scale on the ecp5-85k: tile i:")
    assert "predicted" in out and "schedules tried in" in out


def refused(make, message: str, marker: str) -> None:
    """`make()` raises a ScheduleError with `message` at the line marked `# L:<marker>`."""
    with pytest.raises(ScheduleError) as e:
        make()
    check_error(e.value, ScheduleError, message, __file__, marker)


def decorated(**options):
    """A kernel defined under @hw.kernel(**options), on the line marked `# L:decorated`."""

    @hw.kernel(**options)  # L:decorated
    def k(x: hw.Array[int32, 8]) -> hw.Array[int32, 8]:
        return hw.map(8, lambda i: x[i])

    return k


UNKNOWN = "for schedule='auto'; expected one of ecp5-25k, ecp5-45k, ecp5-85k, ice40-up5k, ice40-hx8k"
ITSELF = "schedule='auto' chooses tile and par itself (metapipelined); remove tile=, par= and metapipeline="


@pytest.mark.parametrize(
    "options, message",
    [
        ({"schedule": "auto", "device": "ecp5-12k"}, f"unknown device 'ecp5-12k' {UNKNOWN}"),
        ({"schedule": "fast"}, "schedule must be 'auto' (or left out, with tile= and par=), got 'fast'"),
        ({"schedule": "auto", "tile": {"i": 4}}, ITSELF),
        ({"schedule": "auto", "metapipeline": False}, ITSELF),
        (
            {"device": "ecp5-85k"},
            "device= goes with schedule='auto'; add schedule='auto' (a hand-written schedule fits any device)",
        ),
    ],
)
def test_bad_auto_requests_are_errors_at_the_users_line(options, message):
    refused(lambda: decorated(**options), message, "decorated")


def test_bad_auto_requests_of_with_schedule_are_errors_at_the_users_line():
    refused(lambda: mm_hand.with_schedule("auto", metapipeline=False), ITSELF, "meta")  # L:meta
    refused(lambda: mm_hand.with_schedule("auto", device=""), f"unknown device '' {UNKNOWN}", "empty")  # L:empty
    refused(
        lambda: mm_hand.with_schedule("auto", device="ice40-up5k"),  # L:ice40
        "the resource model is not calibrated for ice40 devices yet, so ice40-up5k cannot be used; "
        "use one of ecp5-25k, ecp5-45k, ecp5-85k",
        "ice40",
    )


def test_a_mesh_kernel_is_refused():
    mesh = hw.Mesh((2,), ("x",))
    with pytest.raises(ScheduleError) as e:

        @hw.kernel(mesh=mesh, schedule="auto")  # L:mesh
        def k(x: hw.Array[int32, 8]) -> hw.Array[int32, 4]:
            return hw.shard_map(lambda b: hw.psum(b, "x"), mesh=mesh, in_specs=hw.P("x"), out_specs=hw.P())(x)

    check_error(
        e.value,
        ScheduleError,
        "schedule='auto' is for kernels on one PE; give a mesh kernel tile= and par=",
        __file__,
        "mesh",
    )


def test_a_kernel_no_schedule_fits_names_the_resource_and_by_how_much():
    def power(v):
        for _ in range(60):  # 60 products of two variables: 3 DSP blocks each
            v = v * v
        return v

    with pytest.raises(ScheduleError) as e:

        @hw.kernel(schedule="auto", device="ecp5-85k")  # L:nofit
        def k(x: hw.Array[int32, 8]) -> hw.Array[int32, 8]:
            return hw.map(8, lambda i: power(x[i]))

    check_error(
        e.value,
        ScheduleError,
        "no schedule of this kernel fits the ecp5-85k (ECP5 LFE5U-85F): even untiled with one lane it needs "
        "about 180 DSP blocks, 24 more than the 156 schedule='auto' may use there; choose a larger device",
        __file__,
        "nofit",
    )
