"""Exact text file I/O: read bytes-faithfully, write atomically.

Documents are edited line by line and copied verbatim, so reading must not translate
line endings (``newline=""`` keeps ``"\\r\\n"``) and writing must never leave a
half-written file behind (temp file in the same directory, ``fsync``, ``os.replace``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import tempfile
from pathlib import Path
from typing import Iterable, Iterator, Union

from .errors import FileDecodeError, InputError

PathLike = Union[str, "os.PathLike[str]"]


def read_text(path: PathLike) -> str:
    """Return the exact text of a UTF-8 file.

    No newline translation is done, so ``"\\r\\n"`` and a missing final newline survive,
    and ``atomic_write(p, read_text(p))`` rewrites the same bytes. A leading byte-order
    mark is kept as ``"\\ufeff"`` for the same reason.

    Parameters
    ----------
    path
        File to read.

    Raises
    ------
    FileDecodeError
        If the bytes are not valid UTF-8; the message names the file and byte offset.
    """
    data = Path(path).read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise FileDecodeError(path, err.start, err.reason) from None


def atomic_write(path: PathLike, text: str) -> None:
    """Write ``text`` (UTF-8, no newline translation) to ``path`` atomically.

    The text goes to a temporary file in the same directory (so ``os.replace`` stays on
    one file system), is flushed and fsynced, then renamed over ``path``. If anything
    fails or the write is interrupted (``KeyboardInterrupt``; ``SIGTERM`` too under
    :func:`signals_raise`), ``path`` keeps its old content and the temporary file is
    removed. The mode of an existing file is kept. A symbolic link is written through:
    its target gets the new text and the link stays a link.

    Parameters
    ----------
    path
        Destination file.
    text
        Text to write.
    """
    # Resolve links first: renaming over the link itself would turn it into a regular
    # file and leave its target unchanged.
    named = path
    path = Path(os.path.realpath(path))
    data = text.encode("utf-8")  # encode first: a bad str must not touch the disk
    directory = path.parent
    prefix = f".{path.name}.{TEMP_TAG}-"
    _remove_stale(directory, prefix)
    tmp = None
    try:
        try:
            fd, tmp = tempfile.mkstemp(prefix=f"{prefix}{os.getpid()}-", suffix=".tmp", dir=directory)
        except OSError as err:  # name the file the user asked for, not the temporary one
            raise OSError(err.errno, f"cannot write {named}: {err.strerror}") from None
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.chmod(tmp, path.stat().st_mode & 0o7777)
        except FileNotFoundError:
            os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
        tmp = None
        WRITTEN.append(str(named))
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass
    _fsync_dir(directory)


#: Every file this process has replaced, in order (the CLI reports them when interrupted).
WRITTEN: list[str] = []

#: In every temporary file's name: ``.{name}.cad-outlines-{pid}-{random}.tmp``.
TEMP_TAG = "cad-outlines"


def _remove_stale(directory: Path, prefix: str) -> None:
    """Remove temporary files of earlier writes to the same target whose process is gone
    (a ``SIGKILL`` runs no clean-up); those of a live process are left alone."""
    try:
        names = [n for n in os.listdir(directory) if n.startswith(prefix) and n.endswith(".tmp")]
    except OSError:
        return
    for name in names:
        pid_text = name[len(prefix):].split("-", 1)[0]
        if not pid_text.isdigit() or _alive(int(pid_text)):
            continue
        try:
            os.unlink(directory / name)
        except OSError:
            pass


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True


def check_writable(path: PathLike) -> None:
    """Fail before any work when ``path`` cannot be written: its folder is missing or not
    writable, or it is a folder. Raises :class:`InputError` naming ``path``."""
    target = Path(os.path.realpath(path))
    if target.is_dir():
        raise InputError(f"{path}: is a folder, not a file")
    folder = target.parent
    if not folder.is_dir():
        raise InputError(f"{path}: the folder {folder} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise InputError(f"{path}: cannot write in the folder {folder}")


class Terminated(KeyboardInterrupt):
    """A signal :func:`signals_raise` turned into an exception; ``signum`` says which (a
    command then exits ``128 + signum``, as a shell reports a process the signal ended)."""

    def __init__(self, signum: int):
        super().__init__(f"signal {signum}")
        self.signum = signum


@contextlib.contextmanager
def signals_raise(signums: Iterable[int] = (signal.SIGTERM,)) -> Iterator[None]:
    """Turn the given signals into ``KeyboardInterrupt`` (:class:`Terminated`) while the block runs.

    A process killed by ``SIGTERM``'s default action runs no ``finally`` clause, so an
    interrupted :func:`atomic_write` would leave its temporary file behind. Inside this
    block the signal raises instead, the clean-up runs, and the command exits. Only the
    main thread can set handlers; elsewhere the block changes nothing.
    """
    def _raise(signum: int, frame: object) -> None:
        raise Terminated(signum)

    previous = {}
    try:
        for signum in signums:
            previous[signum] = signal.signal(signum, _raise)
    except ValueError:  # not the main thread
        pass
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _fsync_dir(directory: Path) -> None:
    # Makes the rename itself durable; not every platform can open a directory.
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _umask() -> int:
    # os.umask can only be read by setting it; restore at once.
    mask = os.umask(0)
    os.umask(mask)
    return mask
