"""Policy files are regular files inside the configuration (issue #37, item 2).

A FIFO in the contracts folder made ``callgate lint`` hang; a symbolic link to ``/dev/zero``
ended in a MemoryError traceback. Each case here is the real thing — a real FIFO, a real
link, a real device — read through the one reader every command uses
(``callgate_rules.documents.files``).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from callgate_rules.documents.files import ALLOW_LINKS_OUTSIDE_VARIABLE, read_file_text
from callgate_rules.documents.snapshot import read_configuration
from callgate_rules.documents.source import MAX_YAML_BYTES, iter_yaml_files, read_text
from callgate_rules.errors import InputError

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def configuration(tmp_path: Path) -> Path:
    """A copy of the shipped contracts and policies."""
    for folder in ("contracts", "policies"):
        shutil.copytree(REPO / folder, tmp_path / folder)
    return tmp_path


def test_a_fifo_is_refused_unread_and_never_blocks(tmp_path: Path) -> None:
    fifo = tmp_path / "contract.yaml"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match=r"contract\.yaml: is a FIFO \(named pipe\), not a "
                                         "regular file"):
        read_text(fifo)


def test_a_link_to_a_device_is_refused(tmp_path: Path) -> None:
    link = tmp_path / "zero.yaml"
    link.symlink_to("/dev/zero")
    with pytest.raises(InputError, match=r"zero\.yaml: is a character device \(through a "
                                         "symbolic link\\)"):
        read_text(link)


def test_a_socket_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind(str(path))
        with pytest.raises(InputError, match=r"s\.yaml: is a socket"):
            read_text(path)
    finally:
        server.close()


def test_a_folder_named_like_a_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "odd.yaml").mkdir()
    with pytest.raises(InputError, match=r"odd\.yaml: is a folder"):
        read_text(tmp_path / "odd.yaml")


def test_the_size_bound_holds_before_and_while_reading(tmp_path: Path) -> None:
    large = tmp_path / "large.yaml"
    large.write_bytes(b"#" * (MAX_YAML_BYTES + 1))
    with pytest.raises(InputError, match="more than the 4,194,304 bytes"):
        read_text(large)
    small = tmp_path / "small.yaml"
    small.write_text("a: 1\r\nb: 2\r\n")
    assert read_file_text(small, 12) == "a: 1\nb: 2\n"  # line ends as text mode reads them
    with pytest.raises(InputError, match="more than the 11 bytes"):
        read_file_text(small, 11)


def test_text_that_is_not_utf8_is_named(tmp_path: Path) -> None:
    latin = tmp_path / "latin.yaml"
    latin.write_bytes(b"name: caf\xe9\n")
    with pytest.raises(InputError, match=r"latin\.yaml: cannot read: byte 9 is not UTF-8"):
        read_text(latin)


def test_a_link_inside_the_folder_is_followed(tmp_path: Path) -> None:
    folder = tmp_path / "contracts"
    (folder / "shared").mkdir(parents=True)
    (folder / "shared" / "a.yaml").write_text("a: 1\n")
    (folder / "b.yaml").symlink_to(folder / "shared" / "a.yaml")
    files = list(iter_yaml_files([folder]))
    assert [file.name for file in files] == ["b.yaml", "a.yaml"]
    assert read_text(files[0]) == "a: 1\n"


def test_a_link_out_of_the_folder_is_refused_unless_allowed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    outside = tmp_path / "elsewhere.yaml"
    outside.write_text("a: 1\n")
    folder = tmp_path / "contracts"
    folder.mkdir()
    (folder / "b.yaml").symlink_to(outside)
    monkeypatch.delenv(ALLOW_LINKS_OUTSIDE_VARIABLE, raising=False)
    with pytest.raises(InputError, match=r"b\.yaml: is a symbolic link to .*elsewhere\.yaml, "
                                         "outside the configuration folder"):
        list(iter_yaml_files([folder]))
    monkeypatch.setenv(ALLOW_LINKS_OUTSIDE_VARIABLE, "1")
    assert [read_text(file) for file in iter_yaml_files([folder])] == ["a: 1\n"]


def test_a_broken_link_is_named(tmp_path: Path) -> None:
    folder = tmp_path / "contracts"
    folder.mkdir()
    (folder / "gone.yaml").symlink_to(folder / "missing.yaml")
    with pytest.raises(InputError, match=r"gone\.yaml: cannot follow"):
        list(iter_yaml_files([folder]))


def test_the_configuration_reader_keeps_every_other_file(configuration: Path) -> None:
    os.mkfifo(configuration / "contracts" / "pipe.yaml")
    read = read_configuration([configuration / "contracts", configuration / "policies"])
    refused = [file for file in read.files if file.error is not None]
    assert [file.path.name for file in refused] == ["pipe.yaml"]
    assert "is a FIFO" in str(refused[0].error)
    assert sum(1 for file in read.files if file.text is not None) > 3


def _callgate(*args: str, cwd: Path, env: dict[str, str] | None = None
              ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "callgate_rules.cli", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, **(env or {})})


@pytest.mark.integration
def test_lint_names_a_fifo_and_does_not_hang(configuration: Path) -> None:
    os.mkfifo(configuration / "contracts" / "pipe.yaml")
    done = _callgate("lint", "contracts", "policies", cwd=configuration)
    assert done.returncode == 1
    assert "contracts/pipe.yaml: error yaml is a FIFO (named pipe)" in done.stdout
    assert "Traceback" not in done.stderr


@pytest.mark.integration
def test_lint_and_fmt_refuse_a_link_to_dev_zero(configuration: Path) -> None:
    (configuration / "policies" / "zero.yaml").symlink_to("/dev/zero")
    done = _callgate("lint", "contracts", "policies", cwd=configuration)
    assert done.returncode == 2
    assert "policies/zero.yaml: is a symbolic link to /dev/zero, outside the configuration " \
           "folder policies" in done.stderr
    allowed = _callgate("lint", "contracts", "policies", cwd=configuration,
                        env={ALLOW_LINKS_OUTSIDE_VARIABLE: "1"})
    assert allowed.returncode == 1
    assert "policies/zero.yaml: error yaml is a character device" in allowed.stdout
    formatted = _callgate("fmt", "--check", "policies", cwd=configuration,
                          env={ALLOW_LINKS_OUTSIDE_VARIABLE: "1"})
    assert formatted.returncode == 2
    assert "is a character device" in formatted.stderr
    assert "Traceback" not in done.stderr + allowed.stderr + formatted.stderr
