"""Reading the files the tool is given and writing the ones it makes: never a hang, never a
half-written file, never a traceback.

Shared by every reader of user files (.diag, .rules, .deriv, corpora), so that all of them
refuse a FIFO, a device, a directory, an oversized or non-UTF-8 file in the same words; and
by every writer (pictures, compiled code, results, logs), so that each writes beside its
target and renames over it.
"""
from __future__ import annotations

import errno
import os
import stat
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Callable, Iterator

from ..errors import DiagError, Pos, shown
from ..resources import hint


def shown_path(name: str) -> str:
    """A path as messages show it: a shipped file by its package name, else whole unless it is
    very long."""
    name = shown(str(name))
    return name if len(name) <= 120 else f"{name[:58]}...{name[-58:]}"


def write_atomic(path: str | Path, data: str | bytes | Callable[[str], None], kept: str = "",
                 what: str = "") -> Path:
    """Write ``data`` beside ``path`` (synced), then rename it over ``path``: readers see the old
    file or the new one, never half of one. The one writer of the package: pictures, code,
    results, logs, checkpoints, caches. ``data`` is text, bytes, or a function that writes the
    file at the path it is given (a library's own saver, as safetensors'). Readable by
    everyone, as a picture or a result is. A failure (a full disk, a name too long) is the
    tool's error naming ``what`` the file is; ``kept`` says what survives it, e.g. " (the
    previous log is kept)"."""
    out = Path(path)
    tmp = None
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = _fresh(out.parent, f".{out.name[:100]}.")
        with os.fdopen(fd, "wb") as f:
            if callable(data):
                data(tmp)
            else:
                f.write(data.encode("utf-8") if isinstance(data, str) else data)
            f.flush()
        with open(tmp, "rb") as f:  # on disk before it replaces the previous file
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # made private
        os.replace(tmp, out)
        tmp = None
    except OSError as e:
        name = f"{what} {shown_path(str(out))}" if what else shown_path(str(out))
        raise DiagError(f"cannot write {name}: {e.strerror or e}{kept}") from None
    finally:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
    return out


def refuses_files(folder: str | Path) -> str | None:
    """Why no new file can be made in ``folder`` (None: one can): tried, by making an empty one
    and removing it at once, not guessed from its permissions, which say yes to root in /proc
    and on a read-only disk's mount point."""
    probe = os.path.join(folder, f".stringdiag-probe-{os.getpid()}-{os.urandom(4).hex()}")
    try:
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600))
    except OSError as e:
        return str(e.strerror or e)
    try:
        os.unlink(probe)
    except OSError:
        pass
    return None


def _fresh(folder: Path, prefix: str) -> tuple[int, str]:
    """A new file of our own in ``folder`` (private, opened for writing), as ``tempfile.mkstemp``
    makes one: tempfile brings random and shutil (with zlib, bz2, lzma), a few ms of a drawing's start."""
    for _ in range(100):
        name = str(folder / f"{prefix}{os.urandom(6).hex()}")
        try:
            return os.open(name, os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600), name
        except FileExistsError:
            continue
    raise FileExistsError(f"no unused temporary name in {folder}")


Stamp = tuple[int, int, int]  # a file's inode, size and modification time (ns): a save changes one
_noted: ContextVar[dict[str, Stamp | None] | None] = ContextVar("stringdiag_files_read", default=None)


def stamp(path: str | Path) -> Stamp | None:
    """What a file is now, None when there is none: two stamps differ when it was saved between them
    (written in place, or replaced by an editor's rename)."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


@contextmanager
def recording() -> Iterator[dict[str, Stamp | None]]:
    """The files read while the block runs, with each one's stamp from before it was read (so a
    save during the read shows as a change later, never as none): every file that is read goes
    through :func:`read_source`, so what a result was made from (a drawing's imports, however
    deep, a derivation's rules) is known without parsing anything again. Files looked for and not
    found are there too, stamped None: creating one changes the result as well. A recording
    inside another adds its files to the outer one's."""
    files: dict[str, Stamp | None] = {}
    token = _noted.set(files)
    try:
        yield files
    finally:
        _noted.reset(token)
        outer = _noted.get()
        if outer is not None:
            for key, value in files.items():
                outer.setdefault(key, value)


def note(path: str | Path) -> None:
    """Record ``path`` as read (or looked for) by a :func:`recording` under way; else nothing."""
    files = _noted.get()
    if files is not None:
        key = os.path.abspath(path)
        if key not in files:
            files[key] = stamp(key)


def read_source(path: str | Path, limit: int = 16 * 2 ** 20) -> str:
    """A source file's text, or the tool's own error saying why not.

    Only regular files are read (a FIFO or ``/dev/zero`` would block or never end), at most
    ``limit`` bytes (16 MiB); text must be UTF-8, and the first byte that is not is reported
    at its line and column. Line ends are normalised to ``\\n`` as in text mode.
    """
    name = str(path)
    note(name)
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused just below
        fd = os.open(name, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        if e.errno == errno.ENAMETOOLONG:
            raise DiagError(f"cannot read {shown_path(name)}: the file name is too long") from None
        missing = hint(name) if e.errno == errno.ENOENT else ""
        raise DiagError(f"cannot read {shown_path(name)}: {e.strerror or e}{missing}") from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise DiagError(f"cannot read {shown_path(name)}: it is a directory")
        if not stat.S_ISREG(st.st_mode):
            kind = ("a FIFO" if stat.S_ISFIFO(st.st_mode) else "a device" if stat.S_ISCHR(st.st_mode)
                    or stat.S_ISBLK(st.st_mode) else "a socket" if stat.S_ISSOCK(st.st_mode) else "special")
            raise DiagError(f"cannot read {shown_path(name)}: it is {kind}, not a regular file")
        if st.st_size > limit:
            raise DiagError(f"cannot read {shown_path(name)}: it is {st.st_size:,} bytes, more than the "
                            f"{limit / 2 ** 20:g} MiB this tool reads from one file")
        chunks, size = [], 0
        while size <= limit:  # the file may grow while it is read
            # as much as is there (and a byte more, to see the end): asking for the whole limit
            # would make a 16 MiB buffer for every file read
            chunk = os.read(fd, min(limit + 1 - size, max(st.st_size + 1 - size, 1 << 16)))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise DiagError(f"cannot read {shown_path(name)}: it is more than the {limit / 2 ** 20:g} MiB this "
                            "tool reads from one file")
    except OSError as e:
        raise DiagError(f"cannot read {shown_path(name)}: {e.strerror or e}") from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        start = data.rfind(b"\n", 0, e.start) + 1
        line = data.count(b"\n", 0, e.start) + 1
        col = len(data[start:e.start].decode("utf-8", errors="replace")) + 1
        # source="": the message stands alone (the line cannot be shown as text)
        raise DiagError(f"not UTF-8 text: byte 0x{data[e.start]:02x} cannot be decoded", Pos(name, line, col),
                        "") from None
    return text.replace("\r\n", "\n").replace("\r", "\n")
