"""Where ``callgate analyze`` reads a configuration: a directory, or a git ref of the
repository the command runs in.

An argument that names a directory is that directory (a directory wins over a ref of the
same name). Otherwise it is read as a git ref:

- ``REF`` (``HEAD~1``, ``main``, a commit): the configuration at REF in the directory the
  command runs from, as git's ``REF:./`` names it: run from the folder that holds
  ``contracts/`` and ``policies/``, as for a directory argument ``.``;
- ``REF:PATH``: git's own ``REF:PATH`` — PATH from the repository's root, or ``./PATH``
  from the current directory.

The ref's ``contracts/`` and ``policies/`` are copied out of git (``git archive`` of that
tree, nothing checked out, the working tree untouched) into a scratch folder, which the
places printed are mapped back from: ``REF:path/in/repo.yaml:12:7`` in text and JSON, the
working tree's path in SARIF (the file a CI annotation points at).
"""

from __future__ import annotations

import io
import os
import posixpath
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path

from callgate_rules.errors import InputError

PARTS = ("contracts", "policies")
GIT_TIMEOUT_SECONDS = 60


@dataclass(frozen=True)
class ConfigurationSource:
    """A configuration on disk (``directory``), what the person named (``given``), and for
    a git ref how its files are shown: ``shown`` replaces ``directory`` in printed places,
    ``working_tree`` is the folder of the working tree the ref's files correspond to."""

    given: str
    directory: Path
    shown: str
    working_tree: Path

    @property
    def parts(self) -> list[Path]:
        return [self.directory / part for part in PARTS]

    def shown_text(self, text: str) -> str:
        """``text`` with the scratch folder of a ref named as the ref."""
        if self.shown == str(self.directory):
            return text
        return text.replace(str(self.directory) + os.sep, self.shown)

    def working_path(self, path: str) -> str:
        """The working tree's path of a file read from this configuration."""
        inside = Path(path)
        try:
            return str(self.working_tree / inside.relative_to(self.directory))
        except ValueError:
            return path


def resolve(given: str, scratch: Path) -> ConfigurationSource:
    """The configuration ``given`` names: a directory, or a ref materialised under
    ``scratch``; ``InputError`` (exit 2) when it is neither."""
    if Path(given).is_dir():
        missing = [part for part in PARTS if not (Path(given) / part).is_dir()]
        if missing:
            raise InputError(f"{given}: not a configuration directory; it must hold "
                             f"contracts/ and policies/ ({', '.join(p + '/' for p in missing)} "
                             "missing)")
        return ConfigurationSource(given, Path(given), given, Path(given))
    if given.startswith("-") or not given.strip():
        raise InputError(f"{given!r}: neither a directory nor a git ref")
    root = _git(["rev-parse", "--show-toplevel"], Path.cwd(), given)
    if root is None:
        raise InputError(f"{given}: neither a directory nor a git ref (there is no such "
                         "directory, and the current directory is not in a git repository)")
    ref, _, inside = given.partition(":")
    spec = given if ":" in given else f"{given}:./"
    tree = _git(["rev-parse", "--verify", "--quiet", spec], Path.cwd(), given)
    if tree is None or _git(["cat-file", "-t", tree], Path.cwd(), given) != "tree":
        raise InputError(f"{given}: neither a directory nor a git ref of the repository at "
                         f"{root} (no directory of that name; `git rev-parse {spec}` names no "
                         "folder): name a directory, a ref such as HEAD~1 or main, or "
                         "REF:PATH for a folder inside the ref")
    in_repo = _in_repo(given, inside, _git(["rev-parse", "--show-prefix"], Path.cwd(), given))
    # from the root: run in a folder, ls-tree and archive read paths from that folder
    listed = (_git(["ls-tree", "--name-only", tree], Path(root), given) or "").splitlines()
    missing = [part for part in PARTS if part not in listed]
    where = f"{ref}:{in_repo}" if in_repo else f"{ref}:"
    if missing:
        raise InputError(f"{given}: the folder {where} (at the ref) holds no "
                         f"{' and no '.join(p + '/' for p in missing)}; run from the folder "
                         "that holds them, or name it as REF:PATH")
    target = scratch / f"ref-{len(list(scratch.iterdir()))}"
    target.mkdir()
    archive = subprocess.run(["git", "archive", "--format=tar", tree, "--", *PARTS],
                             cwd=root, capture_output=True, timeout=GIT_TIMEOUT_SECONDS,
                             check=False)
    if archive.returncode != 0:
        raise InputError(f"{given}: git archive failed: "
                         f"{archive.stderr.decode(errors='replace').strip()}")
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as bundle:
        bundle.extractall(target, filter="data")
    shown = f"{where}/" if in_repo else where
    return ConfigurationSource(given, target, shown, Path(root) / in_repo)


def _in_repo(given: str, inside: str, prefix: str | None) -> str:
    """The folder's path from the repository's root, as git reads ``REF:PATH``: relative
    to the current directory for ``REF`` and ``REF:./PATH``, else to the root."""
    if ":" not in given or inside == "." or inside.startswith(("./", "../")):
        path = posixpath.join(prefix or "", inside)
    else:
        path = inside
    normal = posixpath.normpath(path) if path else "."
    return "" if normal == "." else normal


def _git(arguments: list[str], cwd: Path, given: str) -> str | None:
    """git's output (stripped), or None when git says no; git missing is a usage error."""
    try:
        done = subprocess.run(["git", *arguments], cwd=cwd, capture_output=True, text=True,
                              timeout=GIT_TIMEOUT_SECONDS, check=False)
    except FileNotFoundError:
        raise InputError(f"{given}: not a directory, and git (to read it as a ref) is not "
                         "installed") from None
    return done.stdout.strip() if done.returncode == 0 else None
