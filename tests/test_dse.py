"""`hwgen dse` (hwgen/dse.py, hwgen/cli_dse.py): the schedule space, the sweep on Dask (and
when a worker is lost), the Pareto front, the files written, and the command's errors."""

import csv
import json
import os
import signal

import pytest

from hwgen import cli, dse
from hwgen.cli import kernels_of, load_app

APP = """
import hwgen as hw
from hwgen import int32

@hw.kernel(tile={"i": 16, "j": 16, "k": 32}, par={"j": 4})
def mm(a: hw.Array[int32, 32, 32], b: hw.Array[int32, 32, 32]) -> hw.Array[int32, 32, 32]:
    return hw.map((32, 32), lambda i, j: hw.sum(32, lambda k: a[i, k] * b[k, j]))
"""


@pytest.fixture
def app(tmp_path):
    path = tmp_path / "mm.py"
    path.write_text(APP)
    return str(path)


def kernel(path):
    return kernels_of(load_app(path), path, None)[0]


def test_the_space_is_tiles_by_lanes_on_one_index(app):
    k = kernel(app)
    every, total = dse.space(k.program, limit=10**6)
    assert total == len(every) and len({json.dumps(p, sort_keys=True) for p in every}) == len(every)
    assert all(len(par) <= 1 for _, par in every)
    assert all(tile.get(n, 1) % lanes == 0 for tile, par in every for n, lanes in par.items())
    sample, total_again = dse.space(k.program, limit=50)
    assert len(sample) == 50 and total_again == total
    assert sample == dse.space(k.program, limit=50)[0]  # a fixed-seed sample


def test_the_front_is_what_no_point_beats_and_the_auto_choice_is_swept(app):
    k = kernel(app)
    result = dse.sweep(app, k, "ecp5-25k", client=None, limit=80)
    points = result["points"]
    assert sum(p["auto"] for p in points) == 1
    fits = [p for p in points if p["fits"]]
    front = [p for p in points if p["front"]]
    assert front and all(p["fits"] for p in front)

    def beats(o, p):
        keys = ("cycles", "luts", "dsps")
        return all(o[x] <= p[x] for x in keys) and any(o[x] < p[x] for x in keys)

    for p in front:
        assert not any(beats(o, p) for o in fits)
    for p in fits:
        if not p["front"]:
            assert any(beats(o, p) or all(o[x] == p[x] for x in ("cycles", "luts", "dsps")) for o in front)


def test_the_command_writes_the_sweep_and_prints_the_front(app, tmp_path, capsys):
    out = tmp_path / "out"
    code = cli.main(["dse", app, "--device", "ecp5-45k", "--limit", "40", "--workers", "1", "--out", str(out)])
    printed, err = capsys.readouterr()
    assert code == 0, err
    assert (
        "dse mm on the ecp5-45k: 41 schedules swept" in printed
        or "dse mm on the ecp5-45k: 40 schedules swept" in printed
    )
    folder = out / "mm" / "dse"
    data = json.loads((folder / "dse.json").read_text())
    rows = list(csv.reader((folder / "dse.csv").open()))
    assert len(rows) == len(data["points"]) + 1 and rows[0][0] == "schedule"
    assert (folder / "dse.png").read_bytes()[:4] == b"\x89PNG"
    assert sum(p["front"] for p in data["points"]) == printed.count(" cycles ")


def test_a_lost_worker_leaves_the_sweep_to_the_others(app):
    from dask.distributed import Client, LocalCluster

    k = kernel(app)
    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None) as cluster, Client(cluster) as client:
        pids = client.run(os.getpid)
        killed = []

        def report(done, count):  # after the first batch: a worker with tasks in hand dies
            if not killed:
                busy = sorted(a for a, keys in client.processing().items() if keys and a in pids)
                if busy:
                    killed.append(busy[0])
                    os.kill(pids[busy[0]], signal.SIGKILL)

        result = dse.sweep(app, k, "ecp5-85k", client=client, limit=120, report=report)
    assert killed
    assert len(result["points"]) in (120, 121)
    alone = dse.sweep(app, k, "ecp5-85k", client=None, limit=120)
    assert result["points"] == alone["points"]  # every point, in the same order, on Dask or not


def test_a_sweep_runs_on_a_scheduler_and_worker_of_their_own(app, tmp_path):
    """`--scheduler`: a Dask scheduler and a worker started as separate processes (as on a
    cluster, here on this machine), reached over TCP; the sweep equals the one without Dask.
    The command runs in a process of its own too, with a time limit (a lost worker would
    leave it waiting)."""
    import subprocess
    import sys
    import time

    from dask.distributed import Client

    info = tmp_path / "scheduler.json"
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    cli_of = [sys.executable, "-m", "distributed.cli.dask_scheduler"]
    started = [subprocess.Popen([*cli_of, "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                                 "--scheduler-file", str(info)], **quiet)]  # fmt: skip
    try:
        for _ in range(600):
            if info.exists() and info.read_text().strip().endswith("}"):
                break
            time.sleep(0.1)
        address = json.loads(info.read_text())["address"]
        worker = [sys.executable, "-m", "distributed.cli.dask_worker", address, "--nworkers", "1", "--nthreads", "1"]
        started.append(subprocess.Popen([*worker, "--no-dashboard"], **quiet))
        with Client(address, timeout="60s") as client:
            client.wait_for_workers(1, timeout=120)
            before = client.run_on_scheduler(lambda dask_scheduler: dask_scheduler.transition_counter)
            out = tmp_path / "out"
            command = [sys.executable, "-m", "hwgen", "dse", app, "--limit", "30", "--scheduler", address]
            done = subprocess.run([*command, "--out", str(out)], capture_output=True, text=True, timeout=300)
            assert done.returncode == 0, done.stderr
            # the sweep's tasks went through that scheduler
            assert client.run_on_scheduler(lambda dask_scheduler: dask_scheduler.transition_counter) > before
        data = json.loads((out / "mm" / "dse" / "dse.json").read_text())
        alone = dse.sweep(app, kernel(app), "ecp5-85k", client=None, limit=30)
        assert data["points"] == json.loads(json.dumps(alone["points"]))
    finally:
        for process in reversed(started):
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def test_a_kernel_nothing_fits_gets_an_empty_front_and_says_why(tmp_path, capsys):
    path = tmp_path / "big.py"
    path.write_text(
        "import hwgen as hw\nfrom hwgen import int32\n\n"
        "def power(v):\n    for _ in range(60):\n        v = v * v\n    return v\n\n"
        "@hw.kernel\n"
        "def big(x: hw.Array[int32, 8]) -> hw.Array[int32, 8]:\n"
        "    return hw.map(8, lambda i: power(x[i]))\n"
    )
    code = cli.main(["dse", str(path), "--limit", "10", "--workers", "1", "--out", str(tmp_path / "out")])
    printed, _ = capsys.readouterr()
    assert code == 0
    assert "0 fit, 0 on the Pareto front" in printed
    assert "schedule='auto' found nothing: no schedule of this kernel fits the ecp5-85k" in printed
    assert (tmp_path / "out" / "big" / "dse" / "dse.png").exists()


def test_an_output_folder_that_cannot_be_written_is_a_one_line_error(app, tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    code = cli.main(["dse", app, "--limit", "5", "--workers", "1", "--out", str(blocker / "out")])
    _, err = capsys.readouterr()
    assert code == 1
    assert err.splitlines()[-1] == f"error: cannot write the sweep to '{blocker / 'out'}': Not a directory"


@pytest.mark.rtl
def test_verify_runs_the_schedule_the_sweep_judged(tmp_path, capsys):
    path = tmp_path / "seq.py"
    path.write_text(APP.replace('par={"j": 4})', 'par={"j": 4}, metapipeline=False)'))
    code = cli.main(["dse", str(path), "--limit", "30", "--workers", "1", "--verify", "1", "--out", str(tmp_path)])
    printed, err = capsys.readouterr()
    assert code == 0, err
    data = json.loads((tmp_path / "mm" / "dse" / "dse.json").read_text())
    first = next(p for p in data["points"] if p["front"])
    assert first["verified_cycles"] == first["cycles"]  # metapipelined, as predicted


@pytest.mark.synth
def test_synth_without_placement_checks_the_estimates_of_the_fastest_point(app, tmp_path, capsys):
    argv = ["dse", app, "--limit", "20", "--workers", "1", "--synth", "1", "--no-place", "--out", str(tmp_path)]
    code = cli.main(argv)
    printed, err = capsys.readouterr()
    assert code == 0, err
    data = json.loads((tmp_path / "mm" / "dse" / "dse.json").read_text())
    first = next(p for p in data["points"] if p["front"])
    got = first["synthesized"]
    assert got["fmax_mhz"] is None and got["luts"] > 0 and got["ffs"] > 0
    assert (got["brams"], got["dsps"]) == (first["brams"], first["dsps"])  # counted by rule: exact
    assert (
        f"synthesized {got['luts']} LUTs, {got['ffs']} FFs, {got['brams']} BRAMs, {got['dsps']} DSPs, not placed"
        in printed
    )


@pytest.mark.parametrize(
    "argv, message",
    [
        (
            ["--device", "ecp5-99k"],
            "unknown device 'ecp5-99k' for --device; expected one of ecp5-25k, ecp5-45k, "
            "ecp5-85k, ice40-up5k, ice40-hx8k",
        ),
        (["--limit", "0"], "--limit must be at least 1, got 0"),
        (["--verify", "-1"], "--verify must be 0 or more, got -1"),
        (["--no-place"], "--no-place applies to --synth K (the points synthesized); give --synth too"),
        (["--limit", "20", "--workers", "1", "--synth", "999"], "--synth 999 is more than the"),
        (["--scheduler", "tcp://127.0.0.1:9"], "cannot reach the Dask scheduler at tcp://127.0.0.1:9: "),
    ],
)
def test_bad_arguments_are_one_line_errors_and_write_nothing(app, tmp_path, capsys, argv, message):
    out = tmp_path / "out"
    code = cli.main(["dse", app, "--out", str(out), *argv])
    printed, err = capsys.readouterr()
    assert code == 1
    errors = [line for line in err.splitlines() if line.startswith("error")]  # (after progress lines)
    assert len(errors) == 1 and errors[0].startswith(f"error: {message}") and err.endswith("\n"), err
    assert not out.exists()


def test_a_mesh_kernel_is_refused(tmp_path, capsys):
    path = tmp_path / "ring.py"
    path.write_text(
        "import hwgen as hw\nfrom hwgen import int32\n\nmesh = hw.Mesh((2,), ('x',))\n\n"
        "@hw.kernel(mesh=mesh)\n"
        "def ring(x: hw.Array[int32, 8]) -> hw.Array[int32, 4]:\n"
        "    return hw.shard_map(lambda b: hw.psum(b, 'x'), mesh=mesh, in_specs=hw.P('x'), out_specs=hw.P())(x)\n"
    )
    out = tmp_path / "out"
    code = cli.main(["dse", str(path), "--out", str(out)])
    _, err = capsys.readouterr()
    assert code == 1
    assert err == "error: dse sweeps kernels on one PE; 'ring' runs on a mesh\n"
    assert not out.exists()
