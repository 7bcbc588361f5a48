"""Reading one raw tool output from disk under fixed rules: a regular file, within a size limit, decoded as
UTF-8 (bad bytes become U+FFFD), in bounded memory.

Every reader of raw outputs goes through :func:`read_raw` (``fleetdx parse``, bundles, ``topo`` commands), so a
FIFO never blocks, ``/dev/zero`` is never slurped, a symlink loop or an unreadable file is a clear
:class:`RawFileError`, and a kernel log of any size is streamed line by line keeping only the lines asked for.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable
from pathlib import Path

from fleetdx.probes.errors import FleetdxError

#: default size limit of one raw output, bytes: real tool outputs are KB to a few MB (an 8-GPU ``nvidia-smi -q
#: -x`` is about 300 KB, a full nccl-tests sweep 10 KB); raise it with ``--max-bytes``
DEFAULT_MAX_BYTES = 16 * 1024 * 1024

_KIND = {
    stat.S_IFIFO: "a FIFO (named pipe)",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
    stat.S_IFDIR: "a directory",
}


class RawFileError(FleetdxError):
    """A raw output that cannot be read under the rules: missing, a symlink loop, not a regular file,
    unreadable, or over its size limit. The message says which, and how to proceed."""


def check_regular(path: Path) -> os.stat_result:
    """``path``'s stat, following symlinks. Raises :class:`RawFileError` when it is missing, a symlink loop,
    unreadable or not a regular file."""
    try:
        st = os.stat(path)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise RawFileError(f"{path}: a symlink loop") from None
        if e.errno == errno.ENOENT:
            raise RawFileError(f"{path}: no such file") from None
        raise RawFileError(f"{path}: cannot be read: {e.strerror}") from None
    kind = _KIND.get(stat.S_IFMT(st.st_mode))
    if kind is not None:
        raise RawFileError(f"{path}: {kind}, not a regular file")
    return st


def read_raw(path: Path, max_bytes: int = DEFAULT_MAX_BYTES, keep: Callable[[str], bool] | None = None) -> str:
    """The text of the raw output at ``path``.

    Args:
        path: a regular file (symlinks followed).
        max_bytes: the most bytes read; a larger file is refused (with ``keep``: the most bytes of kept lines).
        keep: when given, the file is streamed line by line and only the lines it accepts are kept (kernel
            logs: the XID/NVRM/AER lines of a log of any size).

    Raises:
        RawFileError: see :func:`check_regular`; or over ``max_bytes``.
    """
    st = check_regular(path)
    if keep is None and st.st_size > max_bytes:
        raise RawFileError(
            f"{path}: {st.st_size} bytes, over the {max_bytes} byte limit for this kind of output "
            "(raise it with --max-bytes if the file is genuine)"
        )
    try:
        with open(path, "rb") as f:
            if keep is None:
                data = f.read(max_bytes + 1)
                if len(data) > max_bytes:  # grew while we read it
                    raise RawFileError(f"{path}: over the {max_bytes} byte limit (raise it with --max-bytes)")
                return data.decode("utf-8", errors="replace")
            kept: list[str] = []
            size = 0
            while raw := f.readline(max_bytes + 1):
                line = raw.decode("utf-8", errors="replace")
                if keep(line):
                    size += len(raw)
                    if size > max_bytes:
                        raise RawFileError(
                            f"{path}: over {max_bytes} bytes of kept lines (raise it with --max-bytes)"
                        )
                    kept.append(line)
            return "".join(kept)
    except OSError as e:
        raise RawFileError(f"{path}: cannot be read: {e.strerror}") from None
