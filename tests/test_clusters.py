"""A picture's frames (``graph/clusters.py``): records read by their fields, and the tuples the
drawing has always grouped boxes by (equal, same hash, same text), so pictures do not move."""
from __future__ import annotations

import copy
import pickle

import stringdiag
from stringdiag.graph.clusters import DefFrame, SimdFrame
from stringdiag.graph.types import Dim


def test_frames_are_their_tuples():
    s = Dim.var("s")
    simd, opened, pasted = SimdFrame(3, "i", s, False), DefFrame("H#1/", "H"), DefFrame("H#1/", "H", ("compose", 2))
    assert simd == ("simd", 3, "i", s, False) and hash(simd) == hash(("simd", 3, "i", s, False))
    assert repr(opened) == "('def', 'H#1/', 'H')" and pasted == ("def", "H#1/", "H", ("compose", 2))
    assert (simd.statement, simd.label, simd.dim, simd.scan, simd.is_simd) == (3, "i", s, False, True)
    assert (opened.path, opened.name, opened.copy, pasted.copy, opened.is_simd) == ("H#1/", "H", None, ("compose", 2),
                                                                                    False)
    assert simd.with_(statement=("rewrite", 1, 3)) == ("simd", ("rewrite", 1, 3), "i", s, False)
    assert simd.with_(dim=Dim.const(4)).dim == Dim.const(4) and simd.with_(dim=Dim.const(4)).statement == 3
    for back in (pickle.loads(pickle.dumps(pasted)), copy.deepcopy(simd)):
        assert type(back) in (DefFrame, SimdFrame) and back in (pasted, simd)


def test_the_graph_records_frames():
    p = stringdiag.loads("dim s : seq\ndim d : fixed\nlearn F : [d] -> [d]\n"
                         "diagram H(x: [s, d]) -> [s, d] {\n  y[i] = F(x[i])\n  return y\n}\n"
                         "diagram D(x: [s, d]) -> [s, d] {\n  return H(x)\n}\n")
    h = p["H"]
    (frame,) = [c for b in h.boxes() for c in h.record(b).clusters]
    assert type(frame) is SimdFrame and (frame.label, str(frame.dim), frame.scan) == ("i", "s", False)
    e = p["D"].expand()
    frames = [c for b in e.boxes() for c in e.record(b).clusters]
    assert any(type(c) is DefFrame and c.name == "H" and c.path == "H#1/" for c in frames)
    assert all(type(c) in (SimdFrame, DefFrame) for c in frames)
