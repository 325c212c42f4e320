"""The language server (``stringdiag lsp``, on pygls): what an editor asks of a ``.diag`` file.

- diagnostics as you type: the file's text (the editor's, unsaved) is checked as ``check``
  checks it, every warning and the first error at its place; an error inside an imported file
  is shown on the import's line;
- hover: a wire's type, a box's declaration, a dimension's kind and default, a diagram's
  signature and its cost in the seq dimensions (what ``info`` says);
- go to definition: the declaration of a box, dimension or diagram, in this file or the one
  it was imported from;
- completion: the boxes, dimensions and diagrams in scope (the file's, its imports', the
  prelude's).

Hover, definition and completion read the last text that checked, so they keep working
while the text being typed is broken. Nothing in a file is run as Python.
"""
from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote, urlparse

from lsprotocol import types as T
from pygls.lsp.server import LanguageServer

from ..errors import DiagError, Pos
from ..version import __version__

WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)?")


def path_of(uri: str) -> str:
    parsed = urlparse(uri)
    return unquote(parsed.path) if parsed.scheme == "file" else uri


def uri_of(path: str) -> str:
    return Path(path).resolve().as_uri()


def word_at(text: str, line: int, col: int) -> str | None:
    """The name under the cursor (0-based line and column), ``o.Name`` whole."""
    lines = text.splitlines()
    if not 0 <= line < len(lines):
        return None
    for m in WORD.finditer(lines[line]):
        if m.start() <= col <= m.end():
            return m.group(0)
    return None


def _range(pos: Pos | None, length: int = 1) -> T.Range:
    line, col = (pos.line - 1, pos.col - 1) if pos else (0, 0)
    return T.Range(start=T.Position(line=line, character=col), end=T.Position(line=line, character=col + length))


def diagnostics(text: str, path: str) -> tuple[list[T.Diagnostic], object | None]:
    """The file's warnings and first error, placed in this file; and its Program when it checks
    (a ``.diag`` file). A rule file is checked as ``check`` reads it, a derivation by running its
    steps (without ``--verify``); hover and the rest answer for ``.diag`` files."""
    from ..elaborate.loader import loads

    if path.endswith((".rules", ".deriv")):
        return _other_kind(text, path), None
    try:
        prog = loads(text, path)
    except DiagError as e:
        return [_diagnostic(e, path, text, T.DiagnosticSeverity.Error)], None
    except RecursionError:
        return [T.Diagnostic(range=_range(None), message="nested too deeply to check",
                             severity=T.DiagnosticSeverity.Error, source="stringdiag")], None
    return [_diagnostic(w, path, text, T.DiagnosticSeverity.Warning) for w in prog.warnings], prog


def _other_kind(text: str, path: str) -> list[T.Diagnostic]:
    try:
        if path.endswith(".rules"):
            from ..rewrite.rule import loads_rules

            loads_rules(text, path)
        else:
            from ..derive.derivation import Runner

            Runner(text, path, False, None).run()
    except DiagError as e:
        return [_diagnostic(e, path, text, T.DiagnosticSeverity.Error)]
    except RecursionError:
        return [T.Diagnostic(range=_range(None), message="nested too deeply to check",
                             severity=T.DiagnosticSeverity.Error, source="stringdiag")]
    return []


def _diagnostic(e: DiagError, path: str, text: str, severity: T.DiagnosticSeverity) -> T.Diagnostic:
    pos, message = e.pos, e.message
    if pos is not None and Path(pos.file).resolve() != Path(path).resolve():
        message = f"{pos}: {message}"  # in an imported file: shown on the line that imports it
        pos = _import_line(text, pos.file)
    return T.Diagnostic(range=_range(pos), message=message, severity=severity, source="stringdiag")


def _import_line(text: str, file: str) -> Pos | None:
    name = Path(file).name
    for i, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("import") and name in line:
            return Pos("", i, line.index("import") + 1)
    return None


def hover_text(prog, text: str, line: int, col: int) -> str | None:
    """What the name under the cursor is: a wire's type, a declaration, a diagram's cost."""
    from ..graph.types import show_type

    word = word_at(text, line, col)
    if word is None:
        return None
    wire = _wire(prog, word, line)
    if wire is not None:
        return f"wire `{word}` : `{show_type(wire.type)}`" + (f" of {wire.of.name}" if wire.of else "")
    box = prog.lookup_box(word)
    if box is not None:
        via = f" via {box.via.show()}" if box.via else ""
        return f"`{box.signature()}`{via}"
    dim = prog.lookup_dim(word)
    if dim is not None:
        default = f" = {dim.default}" if dim.default is not None else ""
        return f"`dim {dim.name} : {dim.kind}{default}`"
    if prog.lookup_def(word) is not None:
        return _diagram_text(prog[word])
    return None


def _diagram_text(d) -> str:
    from .summary import summarize

    text = f"`{d.signature()}`"
    try:
        cx = summarize(d)["complexity"]
        text += f"\n\ntime O({cx['seq_time']}), memory O({cx['seq_memory']}) in the sequence length"
    except DiagError:
        pass
    return text


def _wire(prog, word: str, line: int):
    """The wire named ``word`` in the diagram around ``line`` (0-based), if any."""
    here = [prog.defs[n] for n in prog.own if prog.defs[n].pos and prog.defs[n].pos.line - 1 <= line]
    if not here:
        return None
    d = max(here, key=lambda defn: defn.pos.line).diagram()
    found = [a for a in map(d.wire, d.wires()) if a.name == word]
    on_line = [a for a in found if a.pos is not None and a.pos.line - 1 == line]
    return (on_line or found or [None])[0]


def definition_of(prog, word: str) -> Pos | None:
    for found in (prog.lookup_box(word), prog.lookup_dim(word), prog.lookup_def(word)):
        if found is not None and found.pos is not None:
            return found.pos
    return None


def completions(prog) -> list[T.CompletionItem]:
    items, seen = [], set()
    for scope in (prog, prog.prelude):
        if scope is None:
            continue
        for name, box in scope.boxes.items():
            if name not in seen:
                seen.add(name)
                items.append(T.CompletionItem(label=name, kind=T.CompletionItemKind.Function, detail=box.signature()))
        for name, dim in scope.dims.items():
            if name not in seen:
                seen.add(name)
                items.append(T.CompletionItem(label=name, kind=T.CompletionItemKind.TypeParameter,
                                              detail=f"dim {name} : {dim.kind}"))
        for name in scope.defs:
            if name not in seen:
                seen.add(name)
                items.append(T.CompletionItem(label=name, kind=T.CompletionItemKind.Class, detail="diagram"))
    return items


def server() -> LanguageServer:
    ls = LanguageServer("stringdiag", __version__)
    checked: dict[str, object] = {}  # uri -> the Program of the last text that checked

    def refresh(uri: str) -> None:
        if not path_of(uri).endswith((".diag", ".rules", ".deriv")):  # taxonomies: highlighted, not checked here
            return
        doc = ls.workspace.get_text_document(uri)
        found, prog = diagnostics(doc.source, path_of(uri))
        if prog is not None:
            checked[uri] = prog
        ls.text_document_publish_diagnostics(T.PublishDiagnosticsParams(uri=uri, diagnostics=found))

    @ls.feature(T.TEXT_DOCUMENT_DID_OPEN)
    def did_open(params: T.DidOpenTextDocumentParams) -> None:
        refresh(params.text_document.uri)

    @ls.feature(T.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(params: T.DidChangeTextDocumentParams) -> None:
        refresh(params.text_document.uri)

    @ls.feature(T.TEXT_DOCUMENT_DID_SAVE)
    def did_save(params: T.DidSaveTextDocumentParams) -> None:
        refresh(params.text_document.uri)

    @ls.feature(T.TEXT_DOCUMENT_HOVER)
    def hover(params: T.HoverParams) -> T.Hover | None:
        prog = checked.get(params.text_document.uri)
        if prog is None:
            return None
        doc = ls.workspace.get_text_document(params.text_document.uri)
        text = hover_text(prog, doc.source, params.position.line, params.position.character)
        return None if text is None else T.Hover(contents=T.MarkupContent(kind=T.MarkupKind.Markdown, value=text))

    @ls.feature(T.TEXT_DOCUMENT_DEFINITION)
    def definition(params: T.DefinitionParams) -> T.Location | None:
        prog = checked.get(params.text_document.uri)
        doc = ls.workspace.get_text_document(params.text_document.uri)
        word = word_at(doc.source, params.position.line, params.position.character)
        pos = definition_of(prog, word) if prog is not None and word else None
        if pos is None or not pos.file or pos.file.startswith("<"):
            return None
        uri = params.text_document.uri if Path(pos.file).resolve() == Path(path_of(doc.uri)).resolve() \
            else uri_of(pos.file)
        return T.Location(uri=uri, range=_range(pos, len(word.split(".")[-1])))

    @ls.feature(T.TEXT_DOCUMENT_COMPLETION)
    def completion(params: T.CompletionParams) -> T.CompletionList:
        prog = checked.get(params.text_document.uri)
        return T.CompletionList(is_incomplete=False, items=completions(prog) if prog is not None else [])

    return ls
