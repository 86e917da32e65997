"""Where persisted entries live: one file per entry under a folder per key, written atomically.

A key names the code object and the world it was compiled in (`fingerprints.entry_key`); its
folder holds every entry compiled for it, in the order they were made. Two processes writing the
same entry write two temporary files and rename them into place: the last rename wins and no
reader ever sees half a file. A file that is damaged, truncated or written by another format is
skipped with one log line, never trusted.

Entries handed over as bytes (`load_artifacts`) are kept in memory beside the folder and read
first; `save_artifacts` bundles what this process wrote or was handed.
"""

from __future__ import annotations

import hashlib
import logging
import os
import pathlib
import pickle
import tempfile
import threading

from .. import process_state

log = logging.getLogger("stenograph.cache")

MAGIC = b"STENOGRAPH-ENTRY\x00"
FORMAT = 1
_BUNDLE_MAGIC = b"STENOGRAPH-ARTIFACTS\x00"
_SUFFIX = ".entry"


# key -> {entry name -> payload}: entries handed over by `load_bundle` (every store reads them)
_handed: dict[str, dict[str, bytes]] = {}
_handed_lock = threading.Lock()


class Store:
    """The entries of one cache folder (None: memory only), and those handed over as bytes."""

    def __init__(self, folder: pathlib.Path | None) -> None:
        self.folder = folder
        self._lock = threading.Lock()
        # key -> {entry name -> payload}: what this process wrote or read, for `bundle`
        self._memory: dict[str, dict[str, bytes]] = {}

    def _key_folder(self, key: str) -> pathlib.Path | None:
        return None if self.folder is None else self.folder / f"v{FORMAT}" / key[:2] / key

    def entries(self, key: str) -> list[tuple[str, bytes]]:
        """(name, payload) of every readable entry of `key`, those handed over first, then the
        folder's oldest first."""
        with _handed_lock:
            found = dict(_handed.get(key, {}))
        with self._lock:
            found.update(self._memory.get(key, {}))
        folder = self._key_folder(key)
        if folder is not None and folder.is_dir():
            for path in sorted(folder.glob(f"*{_SUFFIX}"), key=_mtime):
                if path.stem not in found:
                    payload = _read(path)
                    if payload is not None:
                        found[path.stem] = payload
        with self._lock:
            self._memory.setdefault(key, {}).update(found)
        return list(found.items())

    def put(self, key: str, payload: bytes) -> str:
        """Store one entry of `key`; returns its name (a digest of the payload)."""
        name = hashlib.sha256(payload).hexdigest()[:24]
        with self._lock:
            self._memory.setdefault(key, {})[name] = payload
        folder = self._key_folder(key)
        if folder is not None:
            try:
                _write_atomically(folder / f"{name}{_SUFFIX}", MAGIC + FORMAT.to_bytes(2, "little") + payload)
            except OSError as e:
                log.warning("stenograph cache: could not write %s: %s", folder, e)
        return name

    def clear_memory(self) -> None:
        with self._lock:
            self._memory.clear()


def bundle(stores: list[Store]) -> bytes:
    """The entries `stores` hold and those handed over, as one blob for `load_bundle` elsewhere."""
    with _handed_lock:
        data = {key: dict(entries) for key, entries in _handed.items()}
    for store in stores:
        with store._lock:
            for key, entries in store._memory.items():
                data.setdefault(key, {}).update(entries)
    return _BUNDLE_MAGIC + pickle.dumps((FORMAT, data), protocol=pickle.HIGHEST_PROTOCOL)


def handed_over() -> bool:
    """Whether `load_bundle` handed over any entry."""
    with _handed_lock:
        return any(_handed.values())


def load_bundle(blob: bytes) -> int:
    """Hand over a `Store.bundle()`'s entries to every store; returns how many. Raises
    ValueError for bytes that are not a bundle of this format."""
    if not blob.startswith(_BUNDLE_MAGIC):
        raise ValueError("not a stenograph artifacts bundle")
    try:
        version, data = pickle.loads(blob[len(_BUNDLE_MAGIC) :])
    except Exception as e:
        raise ValueError(f"damaged stenograph artifacts bundle: {e}") from e
    if version != FORMAT or not isinstance(data, dict):
        raise ValueError(f"stenograph artifacts bundle of format {version}, this version reads {FORMAT}")
    count = 0
    with _handed_lock:
        for key, entries in data.items():
            _handed.setdefault(key, {}).update(entries)
            count += len(entries)
    return count


def _mtime(path: pathlib.Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _read(path: pathlib.Path) -> bytes | None:
    try:
        data = path.read_bytes()
    except OSError as e:
        log.info("stenograph cache: skipped %s (%s)", path, e)
        return None
    header = len(MAGIC) + 2
    if not data.startswith(MAGIC) or int.from_bytes(data[len(MAGIC) : header], "little") != FORMAT:
        log.info("stenograph cache: skipped %s (not an entry of format %d)", path, FORMAT)
        return None
    return data[header:]


def _write_atomically(path: pathlib.Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=_SUFFIX)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


_stores: dict[str | None, Store] = {}
_stores_lock = threading.Lock()


def store_for(folder: str | None) -> Store:
    """The process's store of `folder` (None: the memory-only one)."""
    with _stores_lock:
        found = _stores.get(folder)
        if found is None:
            found = _stores[folder] = Store(pathlib.Path(folder).expanduser() if folder else None)
        return found


def _clear() -> None:
    with _stores_lock:
        for store in _stores.values():
            store.clear_memory()
        _stores.clear()  # `store_for` makes a folder's store again when it is next used
    with _handed_lock:
        _handed.clear()


process_state.register("warm.stores", _clear, lambda: len(_stores), memo=True)
