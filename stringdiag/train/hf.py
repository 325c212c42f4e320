"""Hugging Face ``transformers`` loads what :func:`~stringdiag.train.run.save_pretrained` writes:
the modeling file (``hf_modeling.py``, copied as ``modeling_stringdiag.py``) beside the weights,
and ``config.json``'s ``auto_map`` naming its classes, so that
``AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True)`` rebuilds the model from
its sources and ``.generate()`` runs it. Nothing here imports ``transformers``."""
from __future__ import annotations

import json
from pathlib import Path

from ..errors import DiagError
from ..syntax.source import write_atomic

MODELING = "modeling_stringdiag.py"
AUTO_MAP = {"AutoConfig": "modeling_stringdiag.StringdiagConfig",
            "AutoModelForCausalLM": "modeling_stringdiag.StringdiagForCausalLM"}


def write_remote_code(folder: str | Path, config_name: str = "config.json") -> None:
    """Add the modeling file to a saved model's folder and name its classes in the config."""
    folder = Path(folder)
    source = (Path(__file__).parent / "hf_modeling.py").read_text(encoding="utf-8")
    write_atomic(folder / MODELING, source)
    path = folder / config_name
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise DiagError(f"cannot read {path}: {e}") from None
    config.update(auto_map=AUTO_MAP, use_cache=False)
    write_atomic(path, json.dumps(config, indent=2) + "\n")
