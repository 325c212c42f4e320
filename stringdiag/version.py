"""The installed distribution's version: one number, the one in ``pyproject.toml``."""
from __future__ import annotations

from importlib import metadata

try:
    __version__ = metadata.version("stringdiag")
except metadata.PackageNotFoundError:  # run from a source tree that was never installed
    __version__ = "0+unknown"
