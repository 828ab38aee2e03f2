"""Shared helpers: load the apps in patterns/ by name."""

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PATTERNS = sorted(p.stem for p in (ROOT / "patterns").glob("*.py") if not p.stem.startswith("_"))


def load_pattern(name: str):
    path = ROOT / "patterns" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"pattern_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(params=PATTERNS)
def pattern(request):
    return load_pattern(request.param)
