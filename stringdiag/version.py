"""The version: one number, the one in ``pyproject.toml``.

Written here as a constant rather than read from the installed distribution's metadata
(``importlib.metadata`` cost ``stringdiag --version`` about 10 ms of a 30 ms start);
tests/test_fast_start.py checks that it is the number in ``pyproject.toml`` and the installed one.
"""
from __future__ import annotations

__version__ = "0.1.0"
