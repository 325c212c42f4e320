"""Elaboration: a ``.diag`` file's syntax trees to the graph algebra's records and typed
graphs. Loading and imports (``loader.py``), declarations read and checked
(``declarations.py``), and the elaborator of a diagram's body, built from parts:
statements (``statements.py``), expressions (``expressions.py``), box applications
(``calls.py``) over their shared state (``state.py``). It imports ``stringdiag.graph``;
nothing in ``graph/`` imports it."""
