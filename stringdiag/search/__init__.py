"""Derivations found, not only checked: a bounded search between two diagrams (``derive
--find``), the cheapest equivalent form of one (``optimize``), and rules proposed from small
diagrams by their numbers (``discover``). Every answer is a ``.deriv`` text that the ordinary
checker then runs: the search proposes, ``derive`` decides."""
