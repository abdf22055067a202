"""The on-disk cache: where it lives, and why a damaged one is rebuilt rather than trusted.

Compiled programs are stored with a SHA-256 digest of their bytes and what they were compiled from,
checked before they are loaded, so a flipped byte means a recompilation, not a crash
(``targets/llvm/jit.py``); generated Python sources are content-addressed files (their name holds a
hash of their text), and a file whose text differs from what its name promises (truncated, edited)
is written anew before it is used. Files are written atomically and readable by others (the umask
decides), so a cache can be shared.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import stat
import uuid
import warnings
from pathlib import Path

from revdiff.errors import CacheDirectoryError


def cache_dir() -> Path:
    """``$REVDIFF_CACHE_DIR``, else ``$XDG_CACHE_HOME/revdiff``, else ``~/.cache/revdiff``; created if
    missing. Raises CacheDirectoryError when it cannot be created or written."""
    env = os.environ.get("REVDIFF_CACHE_DIR")
    if env:
        path, source = Path(env), "REVDIFF_CACHE_DIR"
    else:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        path, source = Path(base) / "revdiff", "the default location (set REVDIFF_CACHE_DIR to change it)"
    try:
        path.mkdir(parents=True, exist_ok=True)
        if not os.access(path, os.W_OK | os.X_OK):
            raise PermissionError(f"[Errno 13] Permission denied: '{path}'")
    except OSError as exc:
        raise CacheDirectoryError(f"revdiff's cache directory {path} ({source}) cannot be used: {exc}. "
                                  "Set REVDIFF_CACHE_DIR to a writable directory.") from None
    return path


def clear(path) -> None:
    """Remove whatever stands at ``path`` that is not a regular file (a directory, a socket), so
    that a file can be written there."""
    path = Path(path)
    if path.is_symlink() or (path.exists() and not path.is_file()):
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)


_UNWRITABLE: list = []


def unwritable(directory: Path, exc: OSError) -> None:
    """Where the cache cannot take a file (a full disk, a quota, a file-size limit, a directory made
    read-only while the process runs): say so once per process, as a RuntimeWarning naming the
    directory and the system's reason, and go on without caching it (the code compiled and runs)."""
    if not _UNWRITABLE:
        _UNWRITABLE.append(directory)
        warnings.warn(f"revdiff could not write to its cache directory {directory} ({exc.strerror or exc}); "
                      "compiled code runs but is not cached for later processes. Free space there or set "
                      "REVDIFF_CACHE_DIR to another directory", RuntimeWarning, stacklevel=3)


def write_atomically(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file and a rename, so that no reader sees a
    partial file; the file gets the permissions of an ordinary new file (0666 less the umask). Where
    the directory, or the temporary file, went away meanwhile (the cache cleared by someone), once
    more in a directory made anew."""
    try:
        _write_atomically(path, data)
    except FileNotFoundError:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        _write_atomically(path, data)


def _write_atomically(path: Path, data: bytes) -> None:
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{uuid.uuid4().hex[:12]}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # the kernel applies the umask
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        clear(path)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def read_regular(path) -> bytes | None:
    """The bytes of the regular file at ``path``; None where there is none, or something else stands
    there: a FIFO (whose open would wait for a writer forever), a device such as /dev/zero (endless),
    a directory."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO opens at once, and fstat says what it is
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        with os.fdopen(fd, "rb", closefd=False) as f:
            return f.read()
    except OSError:
        return None
    finally:
        os.close(fd)


def ensure_file(path: Path, data: bytes) -> None:
    """``path`` holds exactly ``data`` afterwards: written when missing, not a regular file, or when
    its bytes differ (where the directory takes no file, ``unwritable`` says so and it goes on)."""
    if read_regular(path) != data:
        try:
            write_atomically(path, data)
        except OSError as exc:
            unwritable(path.parent, exc)


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
