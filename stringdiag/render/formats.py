"""The picture formats, by extension: what ``-o`` may name, known without importing Graphviz."""

FORMATS = {".svg": "svg", ".png": "png", ".pdf": "pdf", ".dot": "dot", ".gv": "dot"}
