"""The decision log shows tampering: every line chains to the one before it, signed
checkpoints (Ed25519, keys made by the real ``openssl``) cover the chain, ``callgate log
verify`` names the first line where it breaks — a line dropped, two swapped, one edited,
one inserted, a checkpoint forged with another key — and rotation keeps the chain across
files."""

from __future__ import annotations

import json
import shutil
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("cryptography", reason="the bundle extra is not installed: "
                                           "pip install 'callgate-rules[bundle]'")

from callgate_rules.cli import main  # noqa: E402
from callgate_rules.decision_log import (  # noqa: E402
    GENESIS,
    DecisionLog,
    line_hash,
    verify_log,
)
from callgate_rules.harness.replay import read_log  # noqa: E402
from callgate_rules.signing import load_private_key, load_public_key  # noqa: E402

OPENSSL = shutil.which("openssl")
pytestmark = pytest.mark.skipif(OPENSSL is None, reason="the openssl command is not installed")
START = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path]]:
    folder = tmp_path_factory.mktemp("keys")
    made = {}
    for name in ("auditor", "forger"):
        private, public = folder / f"{name}.pem", folder / f"{name}.pub"
        subprocess.run([OPENSSL, "genpkey", "-algorithm", "ed25519", "-out", str(private)],
                       check=True, capture_output=True)
        subprocess.run([OPENSSL, "pkey", "-in", str(private), "-pubout", "-out", str(public)],
                       check=True, capture_output=True)
        made[name] = (private, public)
    return made


def record(number: int) -> dict[str, object]:
    return {"ts": (START + timedelta(seconds=number)).isoformat(), "request_id": f"r-{number}",
            "tool": "sendPayment", "route": "execute", "arguments": {"amount": number}}


def write_log(path: Path, key: Path, lines: int = 10, every: int = 4) -> Path:
    log = DecisionLog(path, signing_key=load_private_key(key), checkpoint_every=every,
                      clock=Clock())
    for number in range(lines):
        log.write(record(number))
    log.close()
    return path


def log_verify(*arguments: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["log", "verify", *arguments])
    return result.exit_code, result.output


def lines_of(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def rewrite(path: Path, lines: list[str]) -> None:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


# The chain and its checkpoints -------------------------------------------------------------


def test_each_line_chains_to_the_one_before(tmp_path: Path,
                                            keys: dict[str, tuple[Path, Path]]) -> None:
    path = write_log(tmp_path / "decisions.jsonl", keys["auditor"][0])
    lines = lines_of(path)
    records = [json.loads(line) for line in lines]
    assert records[0]["chain"] == {"seq": 1, "prev": GENESIS}
    for before, line in zip(lines, records[1:], strict=False):
        assert line["chain"]["prev"] == line_hash(before)
    checkpoints = [n for n, r in enumerate(records, start=1) if "checkpoint" in r]
    assert checkpoints == [5, 10, 13]  # every 4 decisions, and at close
    assert [r["chain"]["seq"] for r in records] == list(range(1, 14))


def test_an_untouched_log_verifies(tmp_path: Path, keys: dict[str, tuple[Path, Path]]) -> None:
    path = write_log(tmp_path / "decisions.jsonl", keys["auditor"][0])
    code, output = log_verify(str(path), "--public-key", str(keys["auditor"][1]))
    assert code == 0, output
    assert "13 line(s), 3 checkpoint(s) verified: the chain holds" in output


def test_a_dropped_line_is_named(tmp_path: Path, keys: dict[str, tuple[Path, Path]]) -> None:
    path = write_log(tmp_path / "decisions.jsonl", keys["auditor"][0])
    lines = lines_of(path)
    rewrite(path, lines[:3] + lines[4:])
    code, output = log_verify(str(path), "--public-key", str(keys["auditor"][1]))
    assert code == 1
    assert f"{path}:4: the chain breaks here: line(s) 4–4 of the chain are missing" in output


def test_two_lines_swapped_are_named(tmp_path: Path, keys: dict[str, tuple[Path, Path]]) -> None:
    path = write_log(tmp_path / "decisions.jsonl", keys["auditor"][0])
    lines = lines_of(path)
    lines[5], lines[6] = lines[6], lines[5]
    rewrite(path, lines)
    code, output = log_verify(str(path), "--public-key", str(keys["auditor"][1]))
    assert code == 1 and f"{path}:6: the chain breaks here" in output


def test_an_edited_line_is_named(tmp_path: Path, keys: dict[str, tuple[Path, Path]]) -> None:
    path = write_log(tmp_path / "decisions.jsonl", keys["auditor"][0])
    lines = lines_of(path)
    lines[2] = lines[2].replace('"amount":2', '"amount":2000')
    rewrite(path, lines)
    code, output = log_verify(str(path), "--public-key", str(keys["auditor"][1]))
    assert code == 1 and f"{path}:3: the chain breaks here: this line was edited" in output


def test_an_inserted_line_is_named(tmp_path: Path, keys: dict[str, tuple[Path, Path]]) -> None:
    path = write_log(tmp_path / "decisions.jsonl", keys["auditor"][0])
    lines = lines_of(path)
    forged = {**record(99), "chain": {"seq": 8, "prev": line_hash(lines[6])}}
    lines.insert(7, json.dumps(forged, separators=(",", ":")))
    rewrite(path, lines)
    code, output = log_verify(str(path), "--public-key", str(keys["auditor"][1]))
    assert code == 1 and f"{path}:9: the chain breaks here" in output


def test_an_edit_with_the_chain_recomputed_is_caught_by_the_next_checkpoint(
        tmp_path: Path, keys: dict[str, tuple[Path, Path]]) -> None:
    """Whoever lacks the signing key can rehash every line after an edit, but cannot sign."""
    path = write_log(tmp_path / "decisions.jsonl", keys["auditor"][0])
    records = [json.loads(line) for line in lines_of(path)]
    records[6]["arguments"] = {"amount": 1_000_000}  # line 7, covered by checkpoint 10
    head, rebuilt = GENESIS, []
    for made in records:
        made["chain"]["prev"] = head
        line = json.dumps(made, ensure_ascii=False, separators=(",", ":"))
        rebuilt.append(line)
        head = line_hash(line)
    rewrite(path, rebuilt)
    code, output = log_verify(str(path), "--public-key", str(keys["auditor"][1]))
    assert code == 1
    assert f"{path}:10: the checkpoint's signature does not verify" in output
    unchecked, shown = log_verify(str(path))  # without the key only the chain is checked
    assert unchecked == 0 and "checkpoints were not checked" in shown


def test_a_checkpoint_forged_with_another_key_is_named(
        tmp_path: Path, keys: dict[str, tuple[Path, Path]]) -> None:
    forged = write_log(tmp_path / "forged.jsonl", keys["forger"][0])
    code, output = log_verify(str(forged), "--public-key", str(keys["auditor"][1]))
    assert code == 1 and f"{forged}:5: a checkpoint signed by key sha256:" in output
    assert "not by the given key" in output


def test_a_checkpoint_claiming_the_right_key_but_signed_by_another_is_named(
        tmp_path: Path, keys: dict[str, tuple[Path, Path]]) -> None:
    from callgate_rules.signing import key_id

    forged = write_log(tmp_path / "forged.jsonl", keys["forger"][0])
    auditor = key_id(load_public_key(keys["auditor"][1]))
    records = [json.loads(line) for line in lines_of(forged)]
    head, rebuilt = GENESIS, []
    for made in records:
        if "checkpoint" in made:
            made["checkpoint"]["key_id"] = auditor
        made["chain"]["prev"] = head
        line = json.dumps(made, ensure_ascii=False, separators=(",", ":"))
        rebuilt.append(line)
        head = line_hash(line)
    rewrite(forged, rebuilt)
    code, output = log_verify(str(forged), "--public-key", str(keys["auditor"][1]))
    assert code == 1 and f"{forged}:5: the checkpoint's signature does not verify" in output


def test_lines_after_the_last_checkpoint_are_noted(tmp_path: Path,
                                                   keys: dict[str, tuple[Path, Path]]) -> None:
    path = write_log(tmp_path / "decisions.jsonl", keys["auditor"][0])
    rewrite(path, lines_of(path)[:-1])  # the checkpoint written at close, cut off
    found = verify_log([path], load_public_key(keys["auditor"][1]))
    assert found.broken is None
    assert any("the last 2 line(s) come after the last checkpoint" in n for n in found.notes)


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.integers(min_value=3, max_value=25), every=st.integers(min_value=1, max_value=6),
       data=st.data())
def test_any_line_dropped_or_any_two_swapped_breaks_the_chain(
        tmp_path_factory: pytest.TempPathFactory, keys: dict[str, tuple[Path, Path]],
        lines: int, every: int, data: st.DataObject) -> None:
    path = write_log(tmp_path_factory.mktemp("h") / "d.jsonl", keys["auditor"][0], lines, every)
    written = lines_of(path)
    if data.draw(st.booleans(), label="drop"):
        gone = data.draw(st.integers(0, len(written) - 2), label="line dropped")
        changed = written[:gone] + written[gone + 1:]
    else:
        first = data.draw(st.integers(0, len(written) - 2), label="first")
        second = data.draw(st.integers(first + 1, len(written) - 1), label="second")
        changed = list(written)
        changed[first], changed[second] = changed[second], changed[first]
    rewrite(path, changed)
    assert verify_log([path], load_public_key(keys["auditor"][1])).broken is not None


# Files: reopening, rotation, replay --------------------------------------------------------


def test_a_reopened_log_continues_its_chain(tmp_path: Path,
                                            keys: dict[str, tuple[Path, Path]]) -> None:
    path = write_log(tmp_path / "decisions.jsonl", keys["auditor"][0])
    write_log(path, keys["auditor"][0], lines=3)
    assert verify_log([path], load_public_key(keys["auditor"][1])).broken is None
    assert json.loads(lines_of(path)[13])["chain"]["seq"] == 14


def test_rotation_keeps_the_chain_across_files(tmp_path: Path,
                                               keys: dict[str, tuple[Path, Path]]) -> None:
    path = tmp_path / "decisions.jsonl"
    log = DecisionLog(path, signing_key=load_private_key(keys["auditor"][0]),
                      checkpoint_every=5, max_bytes=1000, clock=Clock())
    for number in range(30):
        log.write(record(number))
    if path.stat().st_size == 0:  # the last write rotated: one more for the open file
        log.write(record(30))
    log.close()
    files = sorted(tmp_path.glob("decisions.jsonl*"))
    assert len(files) >= 3
    rotated = [f for f in files if f != path]
    first_of_new = json.loads(lines_of(path)[0])
    newest_rotated = max(rotated, key=lambda f: json.loads(lines_of(f)[0])["chain"]["seq"])
    assert first_of_new["chain"]["prev"] == line_hash(lines_of(newest_rotated)[-1])
    # in any order (a shell glob puts the open file first): ordered by their chain
    code, output = log_verify(*map(str, files), "--public-key", str(keys["auditor"][1]))
    assert code == 0, output
    missing = [f for f in files if f != newest_rotated]
    code, output = log_verify(*map(str, missing), "--public-key", str(keys["auditor"][1]))
    assert code == 1 and f"{path}:1: the chain breaks here" in output
    oldest = min(rotated, key=lambda f: json.loads(lines_of(f)[0])["chain"]["seq"])
    newer = [str(f) for f in files if f != oldest]
    code, output = log_verify(*newer, "--public-key", str(keys["auditor"][1]))
    assert code == 1 and "the lines before it are missing" in output
    code, output = log_verify(*newer, "--partial", "--public-key", str(keys["auditor"][1]))
    assert code == 0 and "--partial: earlier lines rotated away" in output


def test_replay_reads_past_the_checkpoints(tmp_path: Path,
                                           keys: dict[str, tuple[Path, Path]]) -> None:
    path = write_log(tmp_path / "decisions.jsonl", keys["auditor"][0])
    read = [r for _, r in read_log(path)]
    assert len(read) == 10 and all(r is not None and "checkpoint" not in r for r in read)


def test_a_log_without_a_key_still_chains(tmp_path: Path) -> None:
    path = tmp_path / "decisions.jsonl"
    log = DecisionLog(path)
    for number in range(3):
        log.write(record(number))
    log.close()
    assert verify_log([path], None).broken is None
    lines = lines_of(path)
    rewrite(path, [lines[0], lines[2]])
    assert "missing" in str(verify_log([path], None).broken)
