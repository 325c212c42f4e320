"""``stringdiag serve FILE``: a local page of a diagram or a derivation that redraws when the file
is saved, beside the editor (the live picture of Chyp's interface).

The page is the interactive view ``render -o X.html`` (or ``derive -o X.html``) writes, plus a
script that asks the server every half second for the file's version (its size and modification
time) and reloads when it changed; the server redraws on the next request. A file that does not
check shows its error, as the command line prints it, until it is fixed. It listens on
127.0.0.1 only.
"""
from __future__ import annotations

import argparse
import html
import os
import shutil
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from ..errors import DiagError
from ..resources import argument
from .options import integer

HELP = "serve a page of a diagram or derivation that redraws whenever the file is saved"
EXAMPLES = """\
stringdiag serve mine.diag -d Head
stringdiag serve mine.deriv --port 8765"""
POLL_MS = 500
RELOAD = f"""<script>(function () {{
  var seen = "{{version}}";
  setInterval(function () {{
    fetch("/version", {{cache: "no-store"}}).then(function (r) {{ return r.text(); }}).then(function (v) {{
      if (v !== seen) location.reload();
    }}).catch(function () {{}});
  }}, {POLL_MS});
}})();</script>"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE", help="a .diag file (one diagram's page) or a .deriv file (its chain)")
    p.add_argument("-d", "--diagram", metavar="NAME", help="the diagram to show (default: the file's first)")
    p.add_argument("--port", type=integer(0, 65535), default=0, help="the port (default: any free one)")


def version(path: Path) -> str:
    try:
        st = os.stat(path)
    except OSError:
        return "missing"
    return f"{st.st_size}-{st.st_mtime_ns}"


class Page:
    """The page of the file as of its last version, redrawn when the version changes."""

    def __init__(self, path: Path, diagram: str | None):
        self.path, self.diagram = path, diagram
        self.seen, self.body = None, ""
        self.lock = threading.Lock()
        self.scratch = Path(tempfile.mkdtemp(prefix="stringdiag-serve-"))

    def current(self) -> tuple[str, str]:
        with self.lock:
            now = version(self.path)
            if now != self.seen:
                self.seen, self.body = now, self._draw()
            return self.seen, self.body

    def _draw(self) -> str:
        out = self.scratch / "page.html"
        try:
            if self.path.suffix == ".deriv":
                from ..derive.derivation import load_derivation
                from .derive import draw

                draw(load_derivation(self.path), str(self.path), str(out))
            else:
                from ..render.output import save_diagram
                from .common import load_reporting, pick

                prog = load_reporting(str(self.path), lambda e, severity: None)
                d = prog[self.diagram] if self.diagram else pick(prog, None)[0]
                save_diagram(d, out)
            return out.read_text(encoding="utf-8")
        except (DiagError, KeyError, OSError) as e:
            message = e.render() if isinstance(e, DiagError) else str(e.args[0] if e.args else e)
            return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(self.path.name)}: error"
                    f"</title></head><body><pre class='sd-error'>{html.escape(message)}</pre></body></html>")


def handler(page: Page) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            if self.path == "/version":
                self._send(version(page.path).encode(), "text/plain")
            elif self.path in ("/", "/index.html"):
                seen, body = page.current()
                script = RELOAD.replace("{version}", seen)
                text = body.replace("</body>", script + "</body>") if "</body>" in body else body + script
                self._send(text.encode("utf-8"), "text/html; charset=utf-8")
            else:
                self.send_error(404)

        def _send(self, data: bytes, kind: str) -> None:
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args) -> None:  # quiet: the terminal is the user's
            pass

    return Handler


def run(args: argparse.Namespace) -> int:
    path = Path(argument(args.file))
    if not path.is_file():
        raise DiagError(f"cannot read {args.file}: No such file or directory")
    page = Page(path, args.diagram)
    server = ThreadingHTTPServer(("127.0.0.1", args.port), handler(page))
    print(f"serving {args.file} at http://127.0.0.1:{server.server_address[1]}/ (redrawn when it is saved; "
          "Ctrl-C stops)", flush=True)
    try:
        server.serve_forever()
    finally:
        server.server_close()
        shutil.rmtree(page.scratch, ignore_errors=True)
    return 0
