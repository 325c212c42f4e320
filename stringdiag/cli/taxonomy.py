"""``stringdiag taxonomy FILE.tax [-o tree.svg] [--verify] [--json]``: check a family tree of architectures."""
from __future__ import annotations

import argparse

from ..errors import shown
from .common import print_json
from .outputs import add_tikz_body, picture

HELP = "check a family tree of architectures, every edge a derivation; draw it in one picture"
EXAMPLES = """\
stringdiag taxonomy stringdiag:gallery/taxonomy.tax
stringdiag taxonomy stringdiag:gallery/taxonomy.tax -o taxonomy.svg --verify
stringdiag taxonomy stringdiag:gallery/taxonomy.tax -o taxonomy.html
stringdiag taxonomy stringdiag:gallery/taxonomy.tax --json"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE.tax")
    p.add_argument("-o", "--output", metavar="OUT", type=picture,
                   help="the tree in one picture (.svg, .png, .pdf, .dot, .tex), or a page opening its members "
                        "one at a time (.html)")
    add_tikz_body(p)
    p.add_argument("--verify", action="store_true",
                   help="also evaluate both sides of every equality of every edge on random inputs (float64)")
    p.add_argument("--json", action="store_true",
                   help="print the members and the relations (edges, each with its derivation's steps) as JSON")


def run(args: argparse.Namespace) -> int:
    from ..derive.family_tree import load_taxonomy

    tax = load_taxonomy(args.file, verify=args.verify)
    if args.json:
        print_json(as_data(tax))
    else:
        print(f"{args.file}: a tree of {len(tax.members)} members rooted at {tax.root}, "
              f"{len(tax.edges)} edges, each checked{' and verified' if args.verify else ''}")
        print(tax.summary())
    if args.output:
        for wrote in draw(tax, args.output, args.tikz_body):
            if not args.json:
                print(f"wrote {wrote}")
    return 0


def as_data(tax) -> dict:
    """The tree as ``--json`` prints it: members by name, and each edge with its steps."""
    members = {name: {"diagram": m.diagram.name, "file": m.decl.ref.file, "title": m.title,
                      "family": m.decl.family.value if m.decl.family else None, "root": name == tax.root}
               for name, m in tax.members.items()}
    edges = [{"parent": e.decl.parent.text, "child": e.decl.child.text, "derivation": e.decl.deriv.value,
              "relations": [s.relation for s in e.derivation.steps[1:]], "verified": e.verified,
              "changed_boxes": len(e.changed)} for e in tax.edges]
    return {"file": shown(tax.path), "root": tax.root, "members": members, "edges": edges}


def draw(tax, output: str, tikz_body: bool = False) -> list:
    from ..render.output import save_tree

    return save_tree(f"{shown(tax.path)}: rooted at {tax.root}", *tax.tree_parts(), output, tikz_body)
