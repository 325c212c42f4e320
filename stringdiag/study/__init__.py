"""Studies: every attention mechanism of a file, at several depths, trained with one recipe.

The paper's comparison (Khatri et al. (2024), Sec. 5, App. C, Figs. 2 and 4) as a resumable sweep:
``runner`` plans the runs (mechanism x layers), shards them, trains each with the train
loop (its checkpoints make every run resumable) and times them interleaved; ``results``
turns finished runs into ``results.csv`` (with values relative to M1) and merges shards;
``figures`` draws perplexity against parameters and the relative costs.

This package imports neither torch nor matplotlib until it is used.
"""
from __future__ import annotations

__all__ = ["Recipe", "StudyRun", "Study", "plan", "shard"]


def __getattr__(name: str):
    if name in __all__:
        from . import runner

        return getattr(runner, name)
    raise AttributeError(name)
