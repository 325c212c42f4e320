"""``stringdiag lsp`` speaks the Language Server Protocol over stdio: a client written here (JSON-RPC
with Content-Length headers, as an editor frames it) opens a file and gets its diagnostics, edits
it and gets them again, and asks for hover, definition (in the file and across an import) and
completion."""
from __future__ import annotations

import json
import subprocess
import sys
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
        length = None
        while True:
            line = self.proc.stdout.readline()
            assert line, f"the server closed its output: {self.proc.stderr.read().decode()[-2000:]}"
            if line in (b"\r\n", b"\n"):
                break
            name, _, value = line.decode().partition(":")
            if name.lower() == "content-length":
                length = int(value)
        return json.loads(self.proc.stdout.read(length))

    def request(self, method: str, params: dict) -> dict:
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        while True:
            msg = self.read()
            if msg.get("id") == self.next_id and "method" not in msg:
                assert "error" not in msg, msg
                return msg["result"]
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
