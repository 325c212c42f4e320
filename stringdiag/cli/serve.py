"""``stringdiag serve FILE``: a local page of a diagram or a derivation that redraws when the file
is saved, beside the editor (the live picture of Chyp's interface).

The page is the interactive view ``render -o X.html`` (or ``derive -o X.html``) writes, plus a
script that asks the server every half second for the drawing's version and reloads when it
changed. The version is that of every file the drawing read (the file, its imports however deep,
a derivation's ``use``d files and rules, and files looked for and missing), as the reader recorded
them while drawing (``syntax/source.py``): saving any of them redraws the page. A drawing that
fails shows its error, as the command line prints it, until it is fixed. It listens on 127.0.0.1
only, writes no files, and stops cleanly on Ctrl-C or SIGTERM.
"""
from __future__ import annotations

import argparse
import hashlib
import html
import signal
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from ..errors import DiagError
from ..resources import argument
from ..syntax.source import Stamp, note, read_source, recording, stamp
from .options import integer

HELP = "serve a page of a diagram or derivation that redraws whenever the file, or a file it reads, is saved"
EXAMPLES = """\
stringdiag serve stringdiag:gallery/attention.diag -d SelfAttention
stringdiag serve stringdiag:gallery/linearize.deriv --port 8765"""
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


def version(files: dict[str, Stamp | None]) -> str:
    """A short name for the files' stamps: it changes when any of them is saved, made or removed."""
    return hashlib.blake2b(repr(sorted(files.items())).encode(), digest_size=8).hexdigest()


class Page:
    """The page of the file as of the files it was drawn from, redrawn when one of them changes."""

    def __init__(self, path: Path, diagram: str | None):
        self.path, self.diagram = path, diagram
        self.files: dict[str, Stamp | None] = {}  # what the last drawing read (empty: not drawn yet)
        self.body = ""
        self.lock = threading.Lock()

    def current(self) -> tuple[str, str]:
        """The version and the page, drawn again when a file it was drawn from has changed since."""
        with self.lock:
            if not self.files or any(stamp(f) != s for f, s in self.files.items()):
                with recording() as files:
                    note(self.path)  # (it is read first anyway; a page always follows its own file)
                    self.body = self._draw()
                self.files = dict(files)
            return version(self.files), self.body

    def _draw(self) -> str:
        try:
            if self.path.suffix == ".deriv":
                from ..derive.derivation import load_derivation
                from ..render.output import chain_page

                deriv = load_derivation(self.path)
                return chain_page(*deriv.drawn())
            from ..render.output import diagram_page
            from .common import load_reporting, pick

            prog = load_reporting(str(self.path), lambda e, severity: None)
            return diagram_page(prog[self.diagram] if self.diagram else pick(prog, None)[0])
        except (DiagError, OSError) as e:  # (a diagram not in the file: NoSuchDiagram, a DiagError)
            message = e.render() if isinstance(e, DiagError) else str(e.args[0] if e.args else e)
            return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(self.path.name)}: error"
                    f"</title></head><body><pre class='sd-error'>{html.escape(message)}</pre></body></html>")


def handler(page: Page) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            if self.path == "/version":
                self._send(page.current()[0].encode(), "text/plain")
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


class Stopped(Exception):
    """SIGTERM, raised in the serving thread: the server stops as on Ctrl-C, closing its socket."""


def _stop(signum, frame) -> None:
    raise Stopped


def run(args: argparse.Namespace) -> int:
    path = Path(argument(args.file))
    read_source(path)  # refused as every command refuses it: missing, a directory, a FIFO, too large, not UTF-8
    page = Page(path, args.diagram)
    server = ThreadingHTTPServer(("127.0.0.1", args.port), handler(page))
    main = threading.current_thread() is threading.main_thread()  # (signals are the main thread's)
    before = signal.getsignal(signal.SIGTERM) if main else None
    try:
        if main:
            signal.signal(signal.SIGTERM, _stop)
        print(f"serving {args.file} at http://127.0.0.1:{server.server_address[1]}/ (redrawn when it or a file it "
              "reads is saved; Ctrl-C stops)", flush=True)
        server.serve_forever()
    except Stopped:
        pass
    finally:
        server.server_close()
        if main:
            signal.signal(signal.SIGTERM, before if before is not None else signal.SIG_DFL)
    return 0
