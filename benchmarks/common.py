"""Helpers shared by the benchmark scripts."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def load_app(path: Path):
    """Import an app file (patterns/NAME.py) as a module."""
    spec = importlib.util.spec_from_file_location(f"bench_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def app_paths(names=()) -> list:
    """patterns/*.py, or only those named."""
    paths = sorted((ROOT / "patterns").glob("*.py"))
    return [p for p in paths if not names or p.stem in names]
