"""render/svgtree.py reads every SVG of the checkout (Graphviz's pictures, stacked rows, the
derivation chains) into the tree xml.etree.ElementTree reads, element for element."""
from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from stringdiag.render import crossings, svgtree

ROOT = Path(__file__).resolve().parents[1]
SVGS = sorted(p for p in ROOT.rglob("*.svg") if ".git" not in p.parts and "build" not in p.parts)


def shape(e) -> tuple:
    return e.tag, dict(e.attrib), e.text or "", [shape(c) for c in e]


def test_the_checkout_has_pictures():
    assert len(SVGS) > 200


@pytest.mark.parametrize("path", SVGS, ids=lambda p: str(p.relative_to(ROOT)))
def test_read_as_xml_etree_reads_it(path):
    text = path.read_text(encoding="utf-8")
    assert shape(svgtree.fromstring(text)) == shape(ET.fromstring(text))


def test_entities_comments_cdata_and_namespaces():
    text = ('<?xml version="1.0"?>\n<!DOCTYPE svg PUBLIC "a" "b">\n<!-- a&#45;&gt;b <g> -->'
            '<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink">'
            '<g class="node&#32;x" id=\'q\'><title>a&#45;&gt;b &amp; &#x41;&lt;</title>'
            '<a xlink:href="u&quot;v" title="t\n1"><![CDATA[<raw>]]></a><path d="M1,2"/></g>x</svg>')
    assert shape(svgtree.fromstring(text)) == shape(ET.fromstring(text))


def test_crossings_read_without_xml_etree():
    assert "xml.etree" not in crossings.__dict__ and crossings.ET is svgtree


@pytest.mark.parametrize("bad", ["", "<svg>", "<svg></g>", "<a/><b/>", "text"])
def test_a_document_that_is_not_well_formed_is_a_value_error(bad):
    with pytest.raises(ValueError):
        svgtree.fromstring(bad)
