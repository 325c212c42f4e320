"""Constructions: architectures with weights written from a proof, not trained.

``hardmax_classifier`` builds the exact sequence classifier of Alcalde, Fantuzzi and Zuazua (2025),
Theorem 2.4, as a ``.diag`` chain of gallery/hardmax.diag's blocks with explicit float64 weights.
``splines`` builds Lai, Lim and Liu's (2024) ReLU encoders (Lemmas 3.6-3.7, Theorem 3.8, Corollary 3.10)
from gallery/spline_encoder.diag, and ``sumformer_poly`` the Polynomial Sumformer of Alberti et al.'s
(2023) Theorem 4.1 from gallery/sumformer_polynomial.diag; each is compared with its target function.
The records and the input format import without torch; the construction itself loads it on use.
"""
from __future__ import annotations

from .instance import FORMAT, ClassificationInstance, TargetBall, make_instance, read_instance

__all__ = ["Construction", "hardmax_classifier", "write", "FORMAT", "ClassificationInstance", "TargetBall",
           "make_instance", "read_instance"]


def __getattr__(name: str):
    if name in ("Construction", "hardmax_classifier", "write"):
        from . import hardmax

        return getattr(hardmax, name)
    raise AttributeError(name)
