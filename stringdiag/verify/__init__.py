"""Numerical verification: the semantic oracle that compiles both sides of an equation and
evaluates them on the same random float64 inputs with shared weights (PyZX's lesson: an
oracle for every rewrite). It sits above both the rewrite engine and the compiler.
"""
from .oracle import equal, verify_rule

__all__ = ["equal", "verify_rule"]
