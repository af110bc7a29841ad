"""Reading one file of a configuration: a regular file, inside the configuration, bounded.

Every file callgate reads from a configuration — documents, PolicyTests, scenarios, worlds,
calls, the files ``lint``, ``fmt`` and ``catalog`` walk — is read by ``read_file_text``:

- **only a regular file**: a FIFO, a socket, a device or a directory is refused by name
  before a byte is read. The file is opened with ``O_NONBLOCK`` (a FIFO without a writer
  can then never hold the reader) and its type is checked on the open descriptor
  (``fstat``), so a file swapped between a check and the open cannot slip through;
- **bounded before the read starts**: a file larger than the limit is refused from its
  ``fstat`` size, and the read itself stops one byte past the limit, so a file that grows
  while it is read is refused too;
- **links stay inside**: a symbolic link found while walking a configuration folder must
  resolve to a regular file inside that folder (``check_inside``), unless
  ``CALLGATE_ALLOW_LINKS_OUTSIDE=1`` allows links out of it (a configuration assembled from
  a shared folder by links). A file named directly is followed wherever it points: the
  person named it; it must still be a regular file.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from callgate_rules.errors import InputError

ALLOW_LINKS_OUTSIDE_VARIABLE = "CALLGATE_ALLOW_LINKS_OUTSIDE"
_CHUNK = 1 << 16


def links_outside_allowed() -> bool:
    """Whether links out of a configuration folder are followed (the variable is ``1``)."""
    return os.environ.get(ALLOW_LINKS_OUTSIDE_VARIABLE, "").strip().lower() in (
        "1", "true", "yes")


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISDIR(mode):
        return "a folder"
    return "not a regular file"


def _not_regular(path: Path, mode: int, through_link: bool) -> InputError:
    link = " (through a symbolic link)" if through_link else ""
    return InputError(f"{path}: is {_kind(mode)}{link}, not a regular file; callgate reads "
                      "configuration files only from regular files — replace it with the "
                      "file itself")


def too_large(path: str, size: int, limit: int) -> InputError:
    return InputError(f"{path}: the file is {size:,} bytes, more than the {limit:,} "
                      "bytes callgate reads from one file; split it into several files")


def check_inside(path: Path, root: Path) -> None:
    """Refuse ``path`` (found under the folder ``root``) when it is, or passes through, a
    symbolic link that leads out of ``root`` — unless links outside are allowed."""
    if links_outside_allowed():
        return
    try:
        resolved = path.resolve(strict=True)
        inside = root.resolve(strict=True)
    except (OSError, RuntimeError) as error:  # a broken link, a loop of links
        raise InputError(f"{path}: cannot follow: {getattr(error, 'strerror', None) or error}"
                         ) from None
    if resolved != inside and inside not in resolved.parents:
        raise InputError(
            f"{path}: is a symbolic link to {resolved}, outside the configuration folder "
            f"{root}; copy the file into the folder, or set {ALLOW_LINKS_OUTSIDE_VARIABLE}=1 "
            "to follow links out of it")


def read_file_bytes(path: Path, limit: int, what: str = "") -> bytes:
    """The bytes of the regular file ``path``, at most ``limit``; ``InputError`` otherwise."""
    about = f" {what}" if what else ""
    try:
        through_link = path.is_symlink()
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as error:
        if error.errno == errno.ENXIO:  # a socket, or a FIFO opened for writing elsewhere
            raise InputError(f"{path}: is a socket, not a regular file; callgate reads "
                             "configuration files only from regular files") from None
        raise InputError(f"{path}: cannot read{about}: {error.strerror or error}") from None
    try:
        status = os.fstat(descriptor)
        if not stat.S_ISREG(status.st_mode):
            raise _not_regular(path, status.st_mode, through_link)
        if status.st_size > limit:
            raise too_large(str(path), status.st_size, limit)
        # A regular file never blocks; blocking mode back on keeps the reads plain.
        os.set_blocking(descriptor, True)
        chunks: list[bytes] = []
        read = 0
        while read <= limit:
            chunk = os.read(descriptor, min(_CHUNK, limit + 1 - read))
            if not chunk:
                break
            chunks.append(chunk)
            read += len(chunk)
        if read > limit:  # it grew while being read
            raise too_large(str(path), read, limit)
        return b"".join(chunks)
    except OSError as error:
        raise InputError(f"{path}: cannot read{about}: {error.strerror or error}") from None
    finally:
        os.close(descriptor)


def read_file_text(path: Path, limit: int, what: str = "") -> str:
    """``read_file_bytes`` decoded as UTF-8; one ``InputError`` naming the file otherwise."""
    data = read_file_bytes(path, limit, what)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        about = f" {what}" if what else ""
        raise InputError(f"{path}: cannot read{about}: byte {error.start} is not UTF-8; "
                         "save the file as UTF-8") from None
    # as ``open`` in text mode reads it: line ends as "\n" whichever the file uses
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text
