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
while the text being typed is broken, and know the boxes a diagram declares in its body where
the cursor is inside that diagram. A document that is not open (never, or no longer) has no
answers; every request gets a response, an error where its parameters are malformed. Nothing
in a file is run as Python.
"""
from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote, urlparse

from lsprotocol import types as T
from pygls.exceptions import JsonRpcException, JsonRpcInternalError, JsonRpcInvalidRequest
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol, lsp_method

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
    pos, message, length = e.pos, e.message, 1
    if pos is not None and not _same_file(pos.file, path):
        message = f"{pos}: {message}"  # in an imported file: shown on the line that leads to it
        pos, length = _leading_line(text, path, (*e.imported_at, pos))
    return T.Diagnostic(range=_range(pos, length), message=message, severity=severity, source="stringdiag")


def _same_file(a: str, b: str) -> bool:
    return a == b or Path(a).resolve() == Path(b).resolve()


def _leading_line(text: str, path: str, chain: tuple[Pos, ...]) -> tuple[Pos | None, int]:
    """Where this file leads to a place in another: its import on the chain of imports that
    reached that file (the loader's); else (a derivation names the file it reads) the first line
    that names the outermost file of the chain."""
    for pos in chain[:-1]:
        if _same_file(pos.file, path):
            line = text.splitlines()[pos.line - 1] if 0 < pos.line <= len(text.splitlines()) else ""
            end = line.find('"', pos.col)  # the import's quoted file name, both quotes
            return pos, end - pos.col + 2 if end >= pos.col else 1
    name = Path(chain[0].file).name
    lines = list(enumerate(text.splitlines(), 1))
    for i, line in [(i, a) for i, a in lines if not a.lstrip().startswith("#")] + lines:  # (a comment last)
        if name and name in line:
            return Pos(path, i, line.index(name) + 1), len(name)
    return None, 1


def hover_text(prog, text: str, line: int, col: int) -> str | None:
    """What the name under the cursor is: a wire's type, a declaration, a diagram's cost."""
    from ..graph.types import show_type

    word = word_at(text, line, col)
    if word is None:
        return None
    defn = enclosing(prog, line)
    wire = _wire(defn, word, line)
    if wire is not None:
        return f"wire `{word}` : `{show_type(wire.type)}`" + (f" of {wire.of.name}" if wire.of else "")
    if defn is not None and word in defn.generics:
        return f"`{word}` : a dimension parameter of `{defn.name}`"
    box = local_boxes(defn).get(word) or prog.lookup_box(word)
    if box is not None:
        via = f" {box.via.show()}" if box.via else ""  # (show says "via ...")
        where = " where " + ", ".join(f"{n} <= {k}" for n, k in box.bounds) if box.bounds else ""
        return f"`{box.signature()}`{via}{where}"
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


def enclosing(prog, line: int):
    """The definition of this file whose text holds ``line`` (0-based): from its header to the
    last place its syntax tree records (its return), or None outside every diagram."""
    for name in prog.own:
        defn = prog.defs[name]
        if defn.node.pos.line - 1 <= line <= _last_line(defn.node) - 1:
            return defn
    return None


def _last_line(node) -> int:
    """The last line a syntax node records a position on (its own or a descendant's); walked
    without recursion, as a long sum nests as deep as it has terms."""
    last, todo = 0, [node]
    while todo:
        x = todo.pop()
        if isinstance(x, Pos):
            last = max(last, x.line)
        elif isinstance(x, tuple):
            todo.extend(x)
        else:
            todo.extend(getattr(x, f) for f in getattr(x, "_fields", ()))
    return last


def local_boxes(defn) -> dict:
    """The boxes a definition declares in its body, by name, as its elaboration declares them
    (the same ``box_decls``, over the same syntax tree): they shadow the file's boxes there."""
    from ..elaborate.declarations import box_decls
    from ..syntax import ast as A

    if defn is None:
        return {}
    try:
        return {b.name: b for stmt in defn.node.body if isinstance(stmt, A.BoxDecl)
                for b in box_decls(stmt, defn.program, local=True, outer_generics=defn.generics)}
    except DiagError:  # pragma: no cover - the definition checked, so its declarations did
        return {}


def _wire(defn, word: str, line: int):
    """The wire named ``word`` in the diagram ``defn`` (around ``line``, 0-based), if any."""
    if defn is None:
        return None
    d = defn.diagram()
    found = [a for a in map(d.wire, d.wires()) if a.name == word]
    on_line = [a for a in found if a.pos is not None and a.pos.line - 1 == line]
    return (on_line or found or [None])[0]


def definition_of(prog, word: str, line: int) -> Pos | None:
    """Where the name under the cursor (on ``line``, 0-based) is declared: in the diagram around
    it (an input, a wire it names, a dimension parameter, a box it declares), else in scope."""
    defn = enclosing(prog, line)
    here = _named_here(defn, word)
    if here is not None:
        return here
    local = local_boxes(defn).get(word)
    for found in (local, prog.lookup_box(word), prog.lookup_dim(word), prog.lookup_def(word)):
        if found is not None and found.pos is not None:
            return found.pos
    return None


def _named_here(defn, word: str) -> Pos | None:
    """Where a diagram's syntax tree names ``word`` first: an input, a dimension parameter, the
    left of a statement (a wire; a diagram assigns each name once)."""
    if defn is None:
        return None
    node = defn.node
    names = [p.name for p in node.params] + list(node.generics.names if node.generics else ())
    names += [t.name for stmt in node.body for t in getattr(stmt, "targets", ())]
    return next((n.pos for n in names if n.text == word), None)


def completions(prog, line: int) -> list[T.CompletionItem]:
    """The boxes, dimensions and diagrams in scope on ``line`` (0-based): the boxes declared in
    the diagram around it first, then the file's and its imports', then the prelude's."""
    items, seen = [], set()

    def add(name: str, kind: T.CompletionItemKind, detail: str) -> None:
        if name not in seen:
            seen.add(name)
            items.append(T.CompletionItem(label=name, kind=kind, detail=detail))

    for name, box in local_boxes(enclosing(prog, line)).items():
        add(name, T.CompletionItemKind.Function, box.signature())
    for scope in (prog, prog.prelude):
        if scope is None:
            continue
        for name, box in scope.boxes.items():
            add(name, T.CompletionItemKind.Function, box.signature())
        for name, dim in scope.dims.items():
            add(name, T.CompletionItemKind.TypeParameter, f"dim {name} : {dim.kind}")
        for name in scope.defs:
            add(name, T.CompletionItemKind.Class, "diagram")
    return items


class Protocol(LanguageServerProtocol):
    """pygls's protocol, where it would leave a client without an answer: a request whose
    parameters do not fit the protocol's types (``line: -1``) gets a JSON-RPC error (pygls
    answers nothing), as does one after ``shutdown``; a change to a document that is not open
    is ignored (pygls fails on it and shows the editor the error)."""

    def structure_message(self, data: dict):
        try:
            return super().structure_message(data)
        except JsonRpcException as e:
            if "id" in data and "method" in data:  # a request: answered here, and not handled
                detail = f": {_invalid(e.__cause__)}" if e.__cause__ is not None else ""
                self._send_response(data["id"], error=T.ResponseError(code=e.code, message=e.message + detail))
                return ANSWERED
            raise

    def handle_message(self, message) -> None:
        if message is ANSWERED:
            return
        if self._shutdown and isinstance(getattr(message, "id", None), (int, str)) \
                and getattr(message, "method", T.EXIT) != T.EXIT:
            error = JsonRpcInvalidRequest("the server is shutting down")
            self._send_response(message.id, error=error.to_response_error())
            return
        super().handle_message(message)

    @lsp_method(T.TEXT_DOCUMENT_DID_CHANGE)
    def lsp_text_document__did_change(self, params: T.DidChangeTextDocumentParams):
        if unquote(params.text_document.uri) not in self.workspace.text_documents:
            return None  # (the protocol has a client open a document before changing it)
        return (yield from super().lsp_text_document__did_change(params))


ANSWERED = object()  # a request answered while it was read


def _invalid(cause: BaseException) -> str:
    """Which parameters do not fit the protocol's types (cattrs' paths), and why (the values' own
    complaints: ``Position.line should be in range [0:2147483647], but was -1.``)."""
    from cattrs import transform_error
    from cattrs.errors import BaseValidationError

    if not isinstance(cause, BaseValidationError):
        return str(cause)
    why: list[str] = []

    def leaves(e: BaseException) -> None:
        if isinstance(e, BaseExceptionGroup):
            for sub in e.exceptions:
                leaves(sub)
        elif isinstance(e, (ValueError, TypeError)):
            why.append(str(e))

    leaves(cause)
    return "; ".join(transform_error(cause) + why)


def answered(handler):
    """A request's handler whose failure is still an answer: a JSON-RPC error that names it,
    without the traceback pygls would put there (or, for a RecursionError, no answer at all)."""
    from functools import wraps

    @wraps(handler)
    def run(self, params):
        try:
            return handler(self, params)
        except JsonRpcException:
            raise
        except RecursionError:
            raise JsonRpcInternalError("nested too deeply to answer") from None
        except Exception as e:
            raise JsonRpcInternalError(f"{type(e).__name__}: {e}") from None
    return run


CHECKED = (".diag", ".rules", ".deriv")  # taxonomies (.tax) are highlighted, not checked here


class Documents:
    """The open documents' last Programs that checked, by URI; a document that is not open
    (never, or no longer) has none, and its file on disk is never read for it."""

    def __init__(self, ls: LanguageServer):
        self.ls = ls
        self.checked: dict[str, object] = {}

    def text(self, uri: str) -> str | None:
        doc = self.ls.workspace.text_documents.get(unquote(uri))
        return None if doc is None else doc.source

    def refresh(self, uri: str) -> None:
        text = self.text(uri)
        if text is None or not path_of(uri).endswith(CHECKED):
            return
        found, prog = diagnostics(text, path_of(uri))
        if prog is not None:
            self.checked[unquote(uri)] = prog
        self.ls.text_document_publish_diagnostics(T.PublishDiagnosticsParams(uri=uri, diagnostics=found))

    def close(self, uri: str) -> None:
        """Forget it, and clear its diagnostics (``check`` tells a closed file's problems)."""
        self.checked.pop(unquote(uri), None)
        if path_of(uri).endswith(CHECKED):
            self.ls.text_document_publish_diagnostics(T.PublishDiagnosticsParams(uri=uri, diagnostics=[]))

    def program(self, uri: str) -> tuple[object, str] | None:
        """The last Program that checked and the text now open."""
        prog, text = self.checked.get(unquote(uri)), self.text(uri)
        return None if prog is None or text is None else (prog, text)

    @answered
    def hover(self, params: T.HoverParams) -> T.Hover | None:
        found = self.program(params.text_document.uri)
        text = hover_text(*found, params.position.line, params.position.character) if found else None
        return None if text is None else T.Hover(contents=T.MarkupContent(kind=T.MarkupKind.Markdown, value=text))

    @answered
    def definition(self, params: T.DefinitionParams) -> T.Location | None:
        uri, found = params.text_document.uri, self.program(params.text_document.uri)
        word = word_at(found[1], params.position.line, params.position.character) if found else None
        pos = definition_of(found[0], word, params.position.line) if found and word else None
        if word is None or pos is None or not pos.file or pos.file.startswith("<"):
            return None
        target = uri if _same_file(pos.file, path_of(uri)) else uri_of(pos.file)
        return T.Location(uri=target, range=_range(pos, len(word.split(".")[-1])))

    @answered
    def completion(self, params: T.CompletionParams) -> T.CompletionList:
        found = self.program(params.text_document.uri)
        items = completions(found[0], params.position.line) if found else []
        return T.CompletionList(is_incomplete=False, items=items)


def server() -> LanguageServer:
    ls = LanguageServer("stringdiag", __version__, protocol_cls=Protocol)
    docs = Documents(ls)

    @ls.feature(T.TEXT_DOCUMENT_DID_OPEN)
    def did_open(params: T.DidOpenTextDocumentParams) -> None:
        docs.refresh(params.text_document.uri)

    @ls.feature(T.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(params: T.DidChangeTextDocumentParams) -> None:
        docs.refresh(params.text_document.uri)

    @ls.feature(T.TEXT_DOCUMENT_DID_SAVE)
    def did_save(params: T.DidSaveTextDocumentParams) -> None:
        docs.refresh(params.text_document.uri)

    @ls.feature(T.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(params: T.DidCloseTextDocumentParams) -> None:
        docs.close(params.text_document.uri)

    @ls.feature(T.TEXT_DOCUMENT_HOVER)
    def hover(params: T.HoverParams) -> T.Hover | None:
        return docs.hover(params)

    @ls.feature(T.TEXT_DOCUMENT_DEFINITION)
    def definition(params: T.DefinitionParams) -> T.Location | None:
        return docs.definition(params)

    @ls.feature(T.TEXT_DOCUMENT_COMPLETION)
    def completion(params: T.CompletionParams) -> T.CompletionList:
        return docs.completion(params)

    return ls
