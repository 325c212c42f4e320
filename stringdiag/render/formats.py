"""The picture formats, by extension: what ``-o`` may name, known without importing Graphviz.

``FORMATS`` are Graphviz's own; ``DOCUMENTS`` are written from its layout by this package: an
interactive page (``html.py``) and TikZ (``tikz.py``)."""

FORMATS = {".svg": "svg", ".png": "png", ".pdf": "pdf", ".dot": "dot", ".gv": "dot"}
DOCUMENTS = {".html": "html", ".tex": "tex"}
