"""Compiler passes: pure functions on the IR, one per file."""
