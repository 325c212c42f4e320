"""Rewriting diagrams: rules as data, typed matching and double-pushout replacement; the
numerical oracle that checks equations is ``stringdiag.verify`` (Khatri et al. (2024), Sec. 3 and App. A.1.3, B.2, B.3).

>>> import stringdiag
>>> from stringdiag.rewrite import library, find_matches, rewrite
>>> from stringdiag.verify import equal
>>> p = stringdiag.loads('''dim s : seq
... dim d, k : fixed
... diagram Scores(q: [s, k], kk: [s, k], v: [s, d]) -> [s, d] {
...   a[i, j] = sum_f q[i, f] * kk[j, f]
...   y[i] = sum_j a[i, j] * v[j]
...   return y
... }''')
>>> t = p["Scores"]
>>> (m,) = find_matches(t, library()["assoc"])      # (Q K^T) V ...
>>> r = rewrite(t, m)                                # ... = Q (K^T V)
>>> equal(t, r)[0], len(t), len(r)
(True, 2, 2)
"""
from .dpo import rewrite
from .match import Match, find_matches, iter_matches, select
from .rule import Rule, library, load_rules, loads_rules
from .strategy import rewrite_all

__all__ = ["Rule", "library", "load_rules", "loads_rules", "Match", "find_matches", "iter_matches", "select",
           "rewrite", "rewrite_all"]
