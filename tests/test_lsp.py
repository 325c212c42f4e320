"""``stringdiag lsp`` speaks the Language Server Protocol over stdio: a client written here (JSON-RPC
with Content-Length headers, as an editor frames it) opens a file and gets its diagnostics, edits
it and gets them again, and asks for hover, definition (in the file and across an import) and
completion."""
from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

pytest.importorskip("pygls")

ROOT = Path(__file__).resolve().parents[1]

GOOD = """\
dim s : seq
dim d : fixed = 8
learn F : [d] -> [d]
import "other.diag"

diagram Mix(x: [s, d]) -> [s, d] {
  h[i] = F(x[i])
  y = Twice(h)
  return y
}
"""
OTHER = """\
dim s : seq
dim d : fixed
learn G : [d] -> [d]

diagram Twice(x: [s, d]) -> [s, d] {
  return G(G(x))
}
"""


class Client:
    def __init__(self, cwd: Path):
        self.proc = subprocess.Popen([sys.executable, "-m", "stringdiag.cli.main", "lsp"], cwd=cwd,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.next_id = 0
        self.notes: list[dict] = []

    def send(self, payload: dict) -> None:
        body = json.dumps(payload).encode()
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.proc.stdin.flush()

    def read(self) -> dict:
        """The next message; a server silent for 30 s is stopped (so a missing answer fails the test)."""
        watchdog = threading.Timer(30, self.proc.kill)
        watchdog.start()
        try:
            length = None
            while True:
                line = self.proc.stdout.readline()
                assert line, f"the server closed its output (or was silent): {self.proc.stderr.read().decode()[-2000:]}"
                if line in (b"\r\n", b"\n"):
                    break
                name, _, value = line.decode().partition(":")
                if name.lower() == "content-length":
                    length = int(value)
            return json.loads(self.proc.stdout.read(length))
        finally:
            watchdog.cancel()

    def request(self, method: str, params: dict) -> dict:
        msg = self.response(method, params)
        assert "error" not in msg, msg
        return msg["result"]

    def response(self, method: str, params: dict | None) -> dict:
        """The whole response to a request: its result or its error."""
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        while True:
            msg = self.read()
            if msg.get("id") == self.next_id and "method" not in msg:
                return msg
            self.notes.append(msg)

    def notify(self, method: str, params: dict) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def diagnostics(self, uri: str) -> list[dict]:
        while True:
            for i, msg in enumerate(self.notes):
                if msg.get("method") == "textDocument/publishDiagnostics" and msg["params"]["uri"] == uri:
                    del self.notes[i]
                    return msg["params"]["diagnostics"]
            self.notes.append(self.read())

    def close(self) -> None:
        self.request("shutdown", None)
        self.notify("exit", None)
        self.proc.wait(timeout=30)


@pytest.fixture
def client(tmp_path):
    c = Client(tmp_path)
    c.request("initialize", {"processId": None, "rootUri": tmp_path.as_uri(), "capabilities": {}})
    c.notify("initialized", {})
    yield c
    if c.proc.poll() is None:
        c.close()


def _at(uri: str, line: int, character: int) -> dict:
    return {"textDocument": {"uri": uri}, "position": {"line": line, "character": character}}


def _open(client: Client, path: Path, text: str) -> str:
    uri = path.as_uri()
    client.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "diag", "version": 1,
                                                            "text": text}})
    return uri


def _word(text: str, line: int, word: str, nth: int = 0) -> tuple[int, int]:
    """(line, character) of the ``nth`` whole-word ``word`` on 0-based ``line``."""
    cols = [m.start() for m in re.finditer(rf"\b{re.escape(word)}\b", text.splitlines()[line])]
    return line, cols[nth]


def test_diagnostics_as_you_type_hover_definition_completion(client, tmp_path):
    (tmp_path / "other.diag").write_text(OTHER)
    path = tmp_path / "mix.diag"
    uri = path.as_uri()
    broken = GOOD.replace("y = Twice(h)", "y = Twise(h)")  # not saved: the editor's text is what is checked
    client.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "diag", "version": 1,
                                                            "text": broken}})
    (diag,) = client.diagnostics(uri)
    assert diag["severity"] == 1 and "Twise" in diag["message"] and "did you mean 'Twice'" in diag["message"]
    assert diag["range"]["start"] == {"line": 7, "character": 6}

    client.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": 2},
                                             "contentChanges": [{"text": GOOD}]})
    assert client.diagnostics(uri) == []

    hover = client.request("textDocument/hover", _at(uri, 6, 2))  # the wire h
    assert hover["contents"]["value"] == "wire `h` : `[s, d]`"
    hover = client.request("textDocument/hover", _at(uri, 6, 9))  # the box F
    assert hover["contents"]["value"].startswith("`learn F : [d] -> [d]`")
    hover = client.request("textDocument/hover", _at(uri, 1, 4))  # the dimension d
    assert hover["contents"]["value"] == "`dim d : fixed = 8`"
    hover = client.request("textDocument/hover", _at(uri, 5, 10))  # the diagram Mix: its type and cost
    assert hover["contents"]["value"].startswith("`Mix : [s, d] -> [s, d]`") and "time O(s)" in hover["contents"]["value"]

    here = client.request("textDocument/definition", _at(uri, 6, 9))  # F, declared on line 3
    assert here["uri"] == uri and here["range"]["start"] == {"line": 2, "character": 6}
    there = client.request("textDocument/definition", _at(uri, 7, 7))  # Twice, in other.diag
    assert there["uri"] == (tmp_path / "other.diag").resolve().as_uri()
    assert there["range"]["start"] == {"line": 4, "character": 8}

    items = {i["label"]: i for i in client.request("textDocument/completion", _at(uri, 8, 9))["items"]}
    assert {"F", "G", "Twice", "Mix", "s", "d", "softmax"} <= set(items)
    assert items["F"]["detail"] == "learn F : [d] -> [d]"

    client.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": 3},
                                             "contentChanges": [{"text": GOOD.replace("return y", "return")}]})
    (diag,) = client.diagnostics(uri)
    assert diag["severity"] == 1
    hover = client.request("textDocument/hover", _at(uri, 6, 9))  # the last text that checked still answers
    assert hover["contents"]["value"].startswith("`learn F : [d] -> [d]`")


def test_rule_files_and_derivations_get_diagnostics_too(client, tmp_path):
    (tmp_path / "other.diag").write_text(OTHER)
    rules = (tmp_path / "mine.rules").as_uri()
    text = "dim n : fixed\nrule twice(x: [n]) -> [n] {\n  return x + x\n} == {\n  return 2 * y\n}\n"
    client.notify("textDocument/didOpen", {"textDocument": {"uri": rules, "languageId": "diag", "version": 1,
                                                            "text": text}})
    (diag,) = client.diagnostics(rules)
    assert diag["severity"] == 1 and "'y'" in diag["message"] and diag["range"]["start"]["line"] == 4
    client.notify("textDocument/didChange", {"textDocument": {"uri": rules, "version": 2},
                                             "contentChanges": [{"text": text.replace("2 * y", "2 * x")}]})
    assert client.diagnostics(rules) == []

    deriv = (tmp_path / "steps.deriv").as_uri()
    client.notify("textDocument/didOpen", {"textDocument": {"uri": deriv, "languageId": "diag", "version": 1,
                                                            "text": "start other.diag:Twise\n"}})
    (diag,) = client.diagnostics(deriv)
    assert diag["severity"] == 1 and "Twise" in diag["message"] and diag["range"]["start"]["line"] == 0
    client.notify("textDocument/didChange", {"textDocument": {"uri": deriv, "version": 2},
                                             "contentChanges": [{"text": "start other.diag:Twice\n"}]})
    assert client.diagnostics(deriv) == []


def test_an_error_in_an_imported_file_is_shown_on_the_import(client, tmp_path):
    (tmp_path / "other.diag").write_text(OTHER.replace("G(G(x))", "G(G(x)"))
    uri = (tmp_path / "mix.diag").as_uri()
    client.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "diag", "version": 1,
                                                            "text": GOOD}})
    (diag,) = client.diagnostics(uri)
    assert diag["range"]["start"]["line"] == 3 and "other.diag:7:1: unexpected" in diag["message"]


LOCAL = """\
dim s : seq
dim d : fixed = 8
dim v : fixed = 16
learn head : [d] -> [d]

diagram Embed(tokens: [s] of v) -> [s, d] {
  learn wte : -> [v, d]
  learn wpe : -> [s, d] where s <= 1024
  return embed(tokens, wte()) + wpe()
}

diagram Untied(x: [s, d]) -> [s, v] {
  learn wte : -> [d, v]
  learn head : [d] -> [v] via linear(bias = false)
  z[i] = head(x[i])
  return z
}

diagram Plain(x: [s, d]) -> [s, d] {
  y[i] = head(x[i])
  return y
}
"""


def test_boxes_declared_inside_a_diagram_are_known_there(client, tmp_path):
    uri = _open(client, tmp_path / "local.diag", LOCAL)
    (warning,) = client.diagnostics(uri)  # Untied's wte is never used: known all the same
    assert warning["severity"] == 2 and "'wte'" in warning["message"]

    def hover(line: int, word: str, nth: int = 0) -> str:
        return client.request("textDocument/hover", _at(uri, *_word(LOCAL, line, word, nth)))["contents"]["value"]

    def definition(line: int, word: str, nth: int = 0) -> dict:
        found = client.request("textDocument/definition", _at(uri, *_word(LOCAL, line, word, nth)))
        assert found["uri"] == uri
        return found["range"]["start"]

    assert hover(8, "wte") == hover(6, "wte") == "`learn wte :  -> [v, d]`"  # use, declaration
    assert hover(8, "wpe") == "`learn wpe :  -> [s, d]` where s <= 1024"
    assert hover(12, "wte") == "`learn wte :  -> [d, v]`"  # Untied's own, not Embed's
    assert hover(14, "head") == "`learn head : [d] -> [v]` via linear(bias = false)"  # shadows the file's
    assert hover(19, "head") == "`learn head : [d] -> [d]`"  # the file's, in a diagram without its own
    assert definition(8, "wte") == {"line": 6, "character": 8}
    assert definition(14, "head") == {"line": 13, "character": 8}
    assert definition(19, "head") == {"line": 3, "character": 6}

    def completion(line: int) -> dict:
        items = client.request("textDocument/completion", _at(uri, line, 2))["items"]
        return {i["label"]: i["detail"] for i in items}

    assert completion(14)["head"] == "learn head : [d] -> [v]" and completion(14)["wte"] == "learn wte :  -> [d, v]"
    assert completion(8)["wte"] == "learn wte :  -> [v, d]" and completion(8)["head"] == "learn head : [d] -> [d]"
    assert "wte" not in completion(19) and "wte" not in completion(10)  # another diagram; between diagrams


def test_every_box_declared_in_a_gallery_diagram_is_known_at_its_declaration(client, tmp_path):
    for name in ("lm.diag", "gpt2.diag"):
        (tmp_path / name).write_text((ROOT / "gallery" / name).read_text())
    for name in ("lm.diag", "gpt2.diag"):
        text = (tmp_path / name).read_text()
        uri = _open(client, tmp_path / name, text)
        assert all(d["severity"] != 1 for d in client.diagnostics(uri))
        inside = [(i, m) for i, line in enumerate(text.splitlines())
                  if (m := re.match(r"\s+learn\s+([\w\s,]+?)\s*:", line))]  # indented: in a body
        assert len(inside) >= (5 if name == "lm.diag" else 4)
        for line, m in inside:
            for box in re.split(r"\s*,\s*", m.group(1)):
                at = _at(uri, *_word(text, line, box))
                assert client.request("textDocument/hover", at)["contents"]["value"].startswith(f"`learn {box} : ")
                assert client.request("textDocument/definition", at)["range"]["start"] == \
                    {"line": line, "character": _word(text, line, box)[1]}
    lm = (tmp_path / "lm.diag").read_text()
    use = next(i for i, line in enumerate(lm.splitlines()) if "embed(tokens, wte())" in line)
    declared = next(i for i, line in enumerate(lm.splitlines()) if "learn wte" in line)
    found = client.request("textDocument/definition", _at((tmp_path / "lm.diag").as_uri(), *_word(lm, use, "wte")))
    assert found["range"]["start"]["line"] == declared  # GPT's own table, the first declared


def test_a_document_never_opened_has_no_answers_and_no_errors(client, tmp_path):
    (tmp_path / "other.diag").write_text(OTHER)
    (tmp_path / "on_disk.diag").write_text(GOOD)  # on disk, never opened: not read
    for uri in ((tmp_path / "never.diag").as_uri(), (tmp_path / "on_disk.diag").as_uri()):
        assert client.request("textDocument/hover", _at(uri, 6, 9)) is None
        assert client.request("textDocument/definition", _at(uri, 6, 9)) is None
        assert client.request("textDocument/completion", _at(uri, 6, 9))["items"] == []
        client.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": 2},
                                                 "contentChanges": [{"text": GOOD}]})
        client.notify("textDocument/didSave", {"textDocument": {"uri": uri}})
        assert client.request("textDocument/hover", _at(uri, 6, 9)) is None  # the change opened nothing
    assert not [n for n in client.notes if n.get("method") in ("window/showMessage", "textDocument/publishDiagnostics")]


def test_a_request_with_malformed_parameters_gets_an_error(client, tmp_path):
    (tmp_path / "other.diag").write_text(OTHER)
    uri = _open(client, tmp_path / "mix.diag", GOOD)
    assert client.diagnostics(uri) == []
    for bad in (_at(uri, -1, 0), _at(uri, 6, -3), {"textDocument": {"uri": uri}}):
        error = client.response("textDocument/hover", bad)["error"]
        assert error["code"] == -32602 and "$.params.position" in error["message"]  # invalid params
        assert "Traceback" not in json.dumps(error)
    error = client.response("textDocument/hover", _at(uri, -1, 0))["error"]
    assert "Position.line should be in range [0:2147483647], but was -1" in error["message"]
    assert client.request("textDocument/hover", _at(uri, 6, 9))["contents"]["value"].startswith("`learn F")


def test_a_closed_document_is_forgotten(client, tmp_path):
    (tmp_path / "other.diag").write_text(OTHER)
    uri = _open(client, tmp_path / "mix.diag", GOOD.replace("return y", "return h"))
    (warning,) = client.diagnostics(uri)  # y is never used
    assert client.request("textDocument/hover", _at(uri, 6, 9))["contents"]["value"].startswith("`learn F")
    client.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
    assert client.diagnostics(uri) == []  # its diagnostics cleared
    assert client.request("textDocument/hover", _at(uri, 6, 9)) is None
    assert client.request("textDocument/definition", _at(uri, 6, 9)) is None
    assert client.request("textDocument/completion", _at(uri, 6, 9))["items"] == []


def test_a_request_after_shutdown_gets_an_error(client, tmp_path):
    uri = _open(client, tmp_path / "other.diag", OTHER)
    assert client.diagnostics(uri) == []
    assert client.request("shutdown", None) is None
    assert client.response("textDocument/hover", _at(uri, 2, 6))["error"]["code"] == -32600  # invalid request
    client.notify("exit", None)
    assert client.proc.wait(timeout=30) == 0


def test_an_error_in_a_nested_import_is_shown_on_the_import_that_leads_to_it(client, tmp_path):
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "b.diag").write_text('dim s : seq\ndim d : fixed\nimport "c.diag"\n')
    c = OTHER.replace("return G(G(x))", "y = G(x)\n  return G(G(x))")  # y is never used
    (tmp_path / "lib" / "c.diag").write_text(c)
    a = GOOD.replace('import "other.diag"', 'import "lib/b.diag"').replace("Twice(h)", "h")
    uri = _open(client, tmp_path / "a.diag", a)
    (warning,) = client.diagnostics(uri)
    assert warning["severity"] == 2 and "c.diag:6:3" in warning["message"] and "'y'" in warning["message"]
    assert warning["range"] == {"start": {"line": 3, "character": 7}, "end": {"line": 3, "character": 19}}

    (tmp_path / "lib" / "c.diag").write_text(c.replace("G(G(x))", "G(G(x)"))
    client.notify("textDocument/didSave", {"textDocument": {"uri": uri}})
    (error,) = client.diagnostics(uri)
    assert error["severity"] == 1 and "c.diag:8:1: unexpected" in error["message"]
    assert error["range"]["start"] == {"line": 3, "character": 7}  # not at 0:0

    deriv = _open(client, tmp_path / "steps.deriv", "# reads lib/b.diag\nstart lib/b.diag:Twice\n")
    (error,) = client.diagnostics(deriv)
    assert error["severity"] == 1 and "c.diag:8:1" in error["message"]
    assert error["range"] == {"start": {"line": 1, "character": 10}, "end": {"line": 1, "character": 16}}


GENERIC = """\
dim s : seq
dim d : fixed = 8
learn F : [d] -> [d]

diagram Pairs<m>(x: [s, m, d]) -> [s, m, d] {
  h[i, j] = F(x[i, j])
  y = h + x
  return y
}
"""


def test_definition_of_a_diagrams_own_names(client, tmp_path):
    uri = _open(client, tmp_path / "pairs.diag", GENERIC)
    assert client.diagnostics(uri) == []

    def definition(line: int, word: str, nth: int = 0) -> dict:
        found = client.request("textDocument/definition", _at(uri, *_word(GENERIC, line, word, nth)))
        return found and found["range"]["start"]

    assert definition(6, "h") == {"line": 5, "character": 2}  # a wire: where it is named
    assert definition(6, "x") == {"line": 4, "character": 17}  # an input
    assert definition(4, "m", 1) == {"line": 4, "character": 14}  # a dimension parameter
    assert definition(5, "F") == {"line": 2, "character": 6}
    assert definition(5, "i") is None  # an index names nothing declared
    hover = client.request("textDocument/hover", _at(uri, *_word(GENERIC, 4, "m", 1)))
    assert hover["contents"]["value"] == "`m` : a dimension parameter of `Pairs`"


def test_a_deeply_nested_expression_is_answered(client, tmp_path):
    text = GOOD.replace("y = Twice(h)", "y = " + " + ".join(["h"] * 3000)).replace('import "other.diag"\n', "")
    uri = _open(client, tmp_path / "long.diag", text)
    assert [d for d in client.diagnostics(uri) if d["severity"] == 1] == []
    hover = client.request("textDocument/hover", _at(uri, 5, 2))  # the wire h, in the diagram around line 5
    assert hover["contents"]["value"] == "wire `h` : `[s, d]`"
    assert client.request("textDocument/definition", _at(uri, 6, 6)) == {
        "uri": uri, "range": {"start": {"line": 5, "character": 2}, "end": {"line": 5, "character": 3}}}


def test_a_failing_handler_still_answers_without_a_traceback():
    from pygls.exceptions import JsonRpcInternalError

    from stringdiag.cli.language_server import answered

    class Failing:
        @answered
        def deep(self, params):
            return self.deep(params)

        @answered
        def broken(self, params):
            return {}[params]

        @answered
        def fine(self, params):
            return params

    with pytest.raises(JsonRpcInternalError, match="^nested too deeply to answer$") as e:
        Failing().deep(1)
    assert e.value.data is None and e.value.__cause__ is None
    with pytest.raises(JsonRpcInternalError, match="^KeyError: 'x'$"):
        Failing().broken("x")
    assert Failing().fine(7) == 7


def test_a_message_that_is_not_json_is_one_log_line_and_the_server_goes_on(client, tmp_path):
    """A body that is not JSON has no id to answer: the server logs one line (no traceback) on
    standard error, the editor's log, and answers the next request."""
    client.proc.stdin.write(b"Content-Length: 5\r\n\r\n{bad}")
    client.proc.stdin.flush()
    (tmp_path / "other.diag").write_text(OTHER)
    uri = _open(client, tmp_path / "a.diag", GOOD)
    assert client.diagnostics(uri) == []
    hover = client.request("textDocument/hover", _at(uri, *_word(GOOD, 1, "d")))
    assert "fixed" in json.dumps(hover), hover
    client.close()
    log = client.proc.stderr.read().decode()
    assert "Traceback" not in log, log
    assert "stringdiag lsp: error: Unable to handle message: Expecting property name" in log, log
