"""Constructions: architectures with weights written from a proof, not trained.

``hardmax_classifier`` builds the exact sequence classifier of Alcalde, Fantuzzi and Zuazua (2025),
Theorem 2.4, as a ``.diag`` chain of gallery/hardmax.diag's blocks with explicit float64 weights.
"""
from .hardmax import Construction, hardmax_classifier, write
from .instance import FORMAT, Instance, Target, make_instance, read_instance

__all__ = ["Construction", "hardmax_classifier", "write", "FORMAT", "Instance", "Target", "make_instance",
           "read_instance"]
