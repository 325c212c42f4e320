"""The API reference (docs/api.md) documents exactly the public names, ``stringdiag.__all__``:
each ``::: PATH`` directive resolves to one of them (whatever module defines it), and no
private name or other object has an entry. A name added to ``__all__`` fails here until the
page documents it."""
from __future__ import annotations

import importlib
import types
import re
from pathlib import Path

import stringdiag

ROOT = Path(__file__).resolve().parents[1]


def _resolve(path: str):
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            obj = getattr(obj, name)
        return obj
    raise ImportError(path)


def test_the_reference_documents_every_public_name_and_nothing_else():
    page = (ROOT / "docs" / "api.md").read_text()
    reference = page.split("\n## Reference\n", 1)[1]
    def named(n):  # `stringdiag.trace` is the function; once its subpackage is imported, the callable package
        obj = getattr(stringdiag, n)
        return getattr(obj, n) if isinstance(obj, types.ModuleType) and hasattr(obj, n) else obj

    public = {id(named(n)): n for n in stringdiag.__all__ if n != "__version__"}
    documented = []
    for path in re.findall(r"^::: (\S+)$", reference, re.M):
        obj = _resolve(path)
        assert id(obj) in public, f"{path} is not a public name of stringdiag"
        documented.append(public[id(obj)])
    # stringdiag.derive shares its name with the subpackage, which a generator would document instead
    documented += re.findall(r"^#### `stringdiag\.(\w+)\(", reference, re.M)
    assert sorted(documented) == sorted(public.values())
    assert "__version__" in reference
    assert not re.search(r"^::: stringdiag\s*$", reference, re.M)  # the whole module would list private names
