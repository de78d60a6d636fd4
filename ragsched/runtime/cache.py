"""Disk cache of compiled object code, so that a second process does not compile again.

Entries are keyed by a hash of the lowered code, the target and the backend's own source. Each file
carries a checksum of its payload: a corrupt, truncated or foreign file is deleted and rebuilt, never
loaded. Writes go through a temporary file and an atomic rename, so concurrent processes are safe.
Set ``RAGSCHED_CACHE_DIR`` to move the cache, or to an empty string to disable it.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

_MAGIC = b"RAGSCHED-OBJ-1\n"


def cache_dir() -> Path | None:
    env = os.environ.get("RAGSCHED_CACHE_DIR")
    if env is not None:
        return Path(env) if env else None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "ragsched"


def key_of(*parts: str) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode())
        h.update(b"\0")
    return h.hexdigest()


def _path(key: str, kind: str) -> Path | None:
    d = cache_dir()
    return None if d is None else d / key[:2] / f"{key}.{kind}"


def load(key: str, kind: str = "o") -> bytes | None:
    """The cached payload for ``key``, or None (missing, unreadable or corrupt: then it is removed).
    ``kind`` is the file suffix: ``o`` for object code, ``lowered`` for lowered kernels, ``pyc``."""
    p = _path(key, kind)
    if p is None:
        return None
    try:
        data = p.read_bytes()
    except OSError:
        return None
    head = len(_MAGIC) + 64
    if data[:len(_MAGIC)] == _MAGIC and len(data) > head:
        digest, payload = data[len(_MAGIC):head].decode("ascii", "replace"), data[head:]
        if hashlib.sha256(payload).hexdigest() == digest:
            return payload
    try:
        p.unlink()
    except OSError:
        pass
    return None


def has(key: str, kind: str = "o") -> bool:
    """Whether an entry for ``key`` is on disk (not read nor checked: ``load`` does that)."""
    p = _path(key, kind)
    return p is not None and p.is_file()


def store(key: str, payload: bytes, kind: str = "o") -> None:
    """Save ``payload``; a cache that cannot be written is skipped silently (it is only a cache)."""
    p = _path(key, kind)
    if p is None:
        return
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=".tmp-")
        with os.fdopen(fd, "wb") as f:
            f.write(_MAGIC + hashlib.sha256(payload).hexdigest().encode("ascii") + payload)
        os.replace(tmp, p)
    except OSError:
        pass
