"""The repository's data folders ship inside the package: ``grammars/``, ``rules/`` and
``gallery/`` stay at the top level of the checkout and become ``stringdiag/grammars`` ... in the
wheel (what ships of each is ``package-data`` in pyproject.toml; ``stringdiag/resources.py``
finds them either way). Everything else is in pyproject.toml: only the package list is here,
because setuptools' ``find`` sees no package whose folder is outside its parent's.
"""
from setuptools import find_packages, setup

DATA = {f"stringdiag.{name}": name for name in ("grammars", "rules", "gallery")}
FOLDERS = ["stringdiag.prelude", "stringdiag.gallery.proofs", "stringdiag.gallery.modern", "stringdiag.render.assets"]  # data folders inside those (no modules)

setup(packages=find_packages(include=["stringdiag", "stringdiag.*"]) + list(DATA) + FOLDERS,
      package_dir={"": ".", **DATA})
