"""Isomorphism's fast labelling (``iso._Labels.box``, read from a box's record) gives every
box of the gallery the same string as the reference labelling (``iso._box_label``, built
from ``Box.identity``): learnables, scans, repeats, constants, contractions, random boxes."""
from __future__ import annotations

from pathlib import Path

import pytest

import stringdiag
from stringdiag.graph import iso

GALLERY = Path(__file__).resolve().parent.parent / "gallery"


@pytest.mark.parametrize("name", ["attention.diag", "recurrent.diag", "bahdanau.diag", "gpt2.diag", "sumformer.diag"])
def test_fast_labels_are_the_reference_labels(name):
    prog = stringdiag.load(GALLERY / name)
    seen = 0
    for d in [prog[n] for n in prog.diagrams] + [prog[n].expand() for n in prog.diagrams]:
        builder = iso._Builder(d)
        for b in d.boxes():
            record = d.record(b)
            local = builder.local(b, record)
            labels = iso._Labels()
            number = labels.box(record, local)
            fast = list(labels.node_ids)[number]
            assert fast == iso._box_label(record, local)
            seen += 1
    assert seen > 0
