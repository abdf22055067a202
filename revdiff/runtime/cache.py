"""The on-disk cache: where it lives, and why a damaged one is rebuilt rather than trusted.

Generated sources are content-addressed files (their name holds a hash of their text); a file whose
text differs from what its name promises (truncated, edited) is written anew before it is used.
Numba's compiled objects are stored with a SHA-256 digest of their bytes and checked before they are
unpickled, so a flipped byte means a recompilation, not a crash; an index that cannot be read counts
as empty. Files are written atomically and readable by others (the umask decides), so a cache can be
shared. revdiff's own Numba helpers cache in the same directory when the install directory is not
writable, and compile without a disk cache when no directory is.
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import pickle
import shutil
import stat
import uuid
import warnings
from pathlib import Path
from typing import Callable

import numba

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
    its bytes differ."""
    if read_regular(path) != data:
        write_atomically(path, data)


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# ---------------------------------------------------------------------------- Numba's cache

_caching = numba.core.caching
_MAGIC = b"revdiff-verified-1\n"


class VerifiedCacheFile(_caching.IndexDataCacheFile):
    """Numba's index and data files, with a digest in front of every data file, over its bytes and
    the key it was saved under, checked before the data is unpickled: a damaged entry, or one an
    overwritten index points the wrong key to, is removed and counts as a miss."""

    def _load_index(self):
        if os.path.lexists(self._index_path) and read_regular(self._index_path) is None:
            clear(self._index_path)  # a FIFO or a device would block or never end Numba's read
            return {}
        try:
            return super()._load_index()
        except Exception:  # a truncated or overwritten index: start afresh
            return {}

    @contextlib.contextmanager
    def _open_for_write(self, filepath):
        clear(filepath)  # an entry replaced by a directory is written anew, not a crash
        with super()._open_for_write(filepath) as f:
            yield f

    @staticmethod
    def _digest(key, payload: bytes) -> bytes:
        return hashlib.sha256(repr(key).encode() + b"\0" + payload).digest()

    def save(self, key, data):
        self._saving = key  # read by _save_data, which Numba's save calls (under its compile lock)
        super().save(key, data)

    def _save_data(self, name, data):
        payload = self._dump(data)
        with self._open_for_write(self._data_path(name)) as f:
            f.write(_MAGIC + self._digest(self._saving, payload) + payload)

    def load(self, key):
        name = self._load_index().get(key)
        if name is None:
            return None
        path = self._data_path(name)
        data = read_regular(path)
        if data is None:  # removed while the index still names it, or no regular file
            clear(path)
            return None
        head, stored, payload = data[:len(_MAGIC)], data[len(_MAGIC):len(_MAGIC) + 32], data[len(_MAGIC) + 32:]
        if head != _MAGIC or self._digest(key, payload) != stored:
            try:
                os.unlink(path)
            except OSError:
                pass
            return None  # a miss: Numba compiles again and saves a sound entry
        return pickle.loads(payload)


def verify_cache(dispatcher) -> None:
    """Give a Numba dispatcher compiled with ``cache=True`` the verified cache files; where this
    Numba's cache does not have the structure they plug into, no disk cache at all (with a
    warning, once): an unverified one is not used."""
    cache = getattr(dispatcher, "_cache", None)
    old = getattr(cache, "_cache_file", None)
    if isinstance(old, VerifiedCacheFile):
        return
    if isinstance(old, _caching.IndexDataCacheFile) and all(
            hasattr(old, name) for name in ("_load_index", "_dump", "_open_for_write", "_data_path")):
        verified = VerifiedCacheFile.__new__(VerifiedCacheFile)
        verified.__dict__.update(old.__dict__)
        cache._cache_file = verified
        return
    if not _UNVERIFIABLE:
        _UNVERIFIABLE.append(True)
        warnings.warn(f"revdiff cannot verify Numba {numba.__version__}'s disk cache: compiled code is not "
                      "cached on disk", RuntimeWarning, stacklevel=2)
    dispatcher._cache = _caching.NullCache()


_UNVERIFIABLE: list = []


_PACKAGE = str(Path(__file__).resolve().parent.parent)
_IN_TREE = getattr(_caching, "InTreeCacheLocator", None) or getattr(_caching, "_InTreeCacheLocator")


class _RevdiffCacheLocator(_IN_TREE):
    """Caches revdiff's own Numba helpers in revdiff's cache directory (``REVDIFF_CACHE_DIR``), not
    beside the installed package, where they would outlive an uninstall; consulted first, and when
    that directory is not writable, Numba's own locators are."""

    def __init__(self, py_func, py_file):
        super().__init__(py_func, py_file)
        self._cache_path = str(cache_dir() / "numba" / self.get_suitable_cache_subpath(py_file))

    @classmethod
    def from_function(cls, py_func, py_file):
        if os.path.commonpath([os.path.abspath(py_file), _PACKAGE]) != _PACKAGE:
            return None
        try:
            return super().from_function(py_func, py_file)
        except OSError:  # CacheDirectoryError included: then the next locator, or no cache
            return None


def _register_locator() -> None:
    impl = getattr(_caching, "CacheImpl", None) or getattr(_caching, "_CacheImpl")
    locators = impl._locator_classes
    if _RevdiffCacheLocator not in locators:
        locators.insert(0, _RevdiffCacheLocator)


_register_locator()


def cached_njit(**options) -> Callable:
    """``numba.njit(cache=True, **options)`` with verified cache files; without a disk cache when
    no cache directory is writable (Numba refuses ``cache=True`` there)."""
    def wrap(fn):
        try:
            dispatcher = numba.njit(cache=True, **options)(fn)
        except RuntimeError:  # "no locator available": no writable directory anywhere
            warnings.warn(f"revdiff compiles {fn.__qualname__} without a disk cache: no cache directory "
                          "is writable (set REVDIFF_CACHE_DIR)", RuntimeWarning, stacklevel=2)
            return numba.njit(cache=False, **options)(fn)
        verify_cache(dispatcher)
        return dispatcher
    return wrap
