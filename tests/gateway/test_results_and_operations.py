"""Issue 33, the gateway's part, against the real thing: the ``callgate gateway`` process,
the notes upstream answering JSON as *text* (``--text-only``) and the official ``mcp``
client: ``verify`` reads the text's JSON; every ``tools/call`` is its own operation while
the same JSON-RPC request sent again is one; the upstream gets the gateway's environment,
or only the variables ``--upstream-env`` names."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

from .conftest import (
    ACTOR_FILE,
    CONFIG,
    DOCUMENTS,
    GATEWAY,
    REPO,
    Upstream,
    meta_of,
    text_of,
    unique,
    upstream_command,
)

pytestmark = [pytest.mark.anyio, pytest.mark.integration]


def note(title: str) -> dict[str, str]:
    return {"notebookId": "NB-1", "title": title, "body": "b"}


def gateway_args(tmp: Path, *extra: str, text_only: bool = True,
                 documents: list[str] = DOCUMENTS) -> list[str]:
    command = upstream_command(tmp / "state") + (" --text-only" if text_only else "")
    return [*GATEWAY[1:], "--upstream-command", command, *extra,
            "--store", f"sqlite:///{tmp / 'store.sqlite3'}", "--actor", str(ACTOR_FILE),
            *documents]


@asynccontextmanager
async def session_through(tmp: Path, *extra: str, env: dict[str, str] | None = None,
                          documents: list[str] = DOCUMENTS) -> AsyncIterator[ClientSession]:
    parameters = StdioServerParameters(
        command=GATEWAY[0], args=gateway_args(tmp, *extra, documents=documents),
        cwd=str(REPO), env={**os.environ, **(env or {})})
    tmp.mkdir(parents=True, exist_ok=True)
    with (tmp / "gateway.log").open("a") as errlog:
        async with stdio_client(parameters, errlog) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                yield session


async def test_a_json_text_answer_is_verified_and_each_call_is_an_operation(
        tmp_path: Path) -> None:
    title = unique("text")
    async with session_through(tmp_path) as session:
        first = await session.call_tool("createNote", note(title))
        second = await session.call_tool("createNote", note(title))
    upstream = Upstream(tmp_path / "state")
    # verify reads result.title: the text's JSON, not the MCP envelope
    assert meta_of(first)["callgate/route"] == "return_result", text_of(first)
    assert first.structured_content is None and json.loads(text_of(first))["title"] == title
    # two identical tools/calls in one session: two operations, two writes
    assert meta_of(second)["callgate/route"] == "return_result"
    assert meta_of(first)["callgate/operation_id"] != meta_of(second)["callgate/operation_id"]
    assert len(upstream.notes(title)) == 2


async def test_the_upstream_inherits_the_environment_or_only_the_named_variables(
        tmp_path: Path) -> None:
    variables = {"NOTES_API_KEY": "k-1", "NOTES_REGION": "eu"}
    async with session_through(tmp_path / "all", env=variables) as session:
        await session.list_tools()
    async with session_through(tmp_path / "named", "--upstream-env", "NOTES_API_KEY",
                               env=variables) as session:
        await session.list_tools()
    inherited = json.loads((tmp_path / "all" / "state" / "env.json").read_text())
    named = json.loads((tmp_path / "named" / "state" / "env.json").read_text())
    assert inherited == variables
    assert named == {"NOTES_API_KEY": "k-1"}


def test_the_same_json_rpc_request_sent_again_is_one_operation(tmp_path: Path) -> None:
    """Raw JSON-RPC over stdio: the client's SDK never reuses an id, a resend does."""
    process = subprocess.Popen([GATEWAY[0], *gateway_args(tmp_path)], cwd=REPO,
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=(tmp_path / "gateway.log").open("wb"))
    assert process.stdin is not None and process.stdout is not None
    title = unique("resend")

    def send(message: dict[str, object]) -> None:
        assert process.stdin is not None
        process.stdin.write((json.dumps(message) + "\n").encode())
        process.stdin.flush()

    def answer(request_id: int) -> dict[str, object]:
        assert process.stdout is not None
        while True:
            line = process.stdout.readline()
            assert line, (tmp_path / "gateway.log").read_text()
            message = json.loads(line)
            if message.get("id") == request_id:
                return dict(message)

    try:
        send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"}}})
        answer(1)
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                "params": {"name": "createNote", "arguments": note(title)}}
        send(call)
        first = answer(7)
        send(call)  # the same request again, as after a lost answer
        again = answer(7)
    finally:
        process.stdin.close()
        process.wait(20)
    routes = [m["result"]["_meta"]["callgate/route"] for m in (first, again)]  # type: ignore
    assert routes == ["return_result", "return_receipt"]
    assert len(Upstream(tmp_path / "state").notes(title)) == 1


async def test_resources_and_prompts_pass_only_under_the_allow_list(tmp_path: Path) -> None:
    from mcp.shared.exceptions import MCPError

    async with session_through(tmp_path, "--pass-resource", "notes://notebooks/*",
                               "--pass-prompt", "summar*") as session:
        resources = await session.list_resources()
        read = await session.read_resource("notes://notebooks/NB-1")
        with pytest.raises(MCPError):
            await session.read_resource("notes://secrets/keys")
        prompts = await session.list_prompts()
        prompt = await session.get_prompt("summarize")
        with pytest.raises(MCPError):
            await session.get_prompt("exfiltrate")
    assert [str(r.uri) for r in resources.resources] == ["notes://notebooks/NB-1"]
    assert read.contents[0].text == "Acme projects"  # type: ignore[union-attr]
    assert [p.name for p in prompts.prompts] == ["summarize"]
    assert prompt.messages[0].content.text == "Summarize my notes."  # type: ignore[union-attr]
    upstream = Upstream(tmp_path / "state")
    # the refused ones never reached the upstream; every pass-through is logged
    assert upstream.calls("resources/read", uri="notes://secrets/keys") == []
    assert upstream.calls("prompts/get", name="exfiltrate") == []
    log = (tmp_path / "gateway.log").read_text()
    assert "read resource notes://notebooks/NB-1" in log
    assert "refused resources/read notes://secrets/keys" in log
    assert "refused prompts/get exfiltrate" in log


async def test_without_an_allow_list_resources_and_prompts_are_not_offered(
        tmp_path: Path) -> None:
    from mcp.shared.exceptions import MCPError

    async with session_through(tmp_path) as session:
        with pytest.raises(MCPError):
            await session.list_resources()
        with pytest.raises(MCPError):
            await session.get_prompt("summarize")
    assert Upstream(tmp_path / "state").calls("prompts/get") == []


async def test_a_deduplication_window_spans_reconnects(tmp_path: Path) -> None:
    """``spec.deduplication_window``: the same write by the same actor within it, from a
    new session, gets the earlier receipt; other arguments write. Off (the shared
    documents), the same call from a new session writes again."""
    documents = tmp_path / "documents"
    shutil.copytree(CONFIG, documents)
    contract = documents / "contracts" / "createNote.yaml"
    contract.write_text(contract.read_text().replace(
        "  idempotency: key\n", "  idempotency: key\n  deduplication_window: 10m\n"))
    windowed = [str(documents / "contracts"), str(documents / "policies")]
    title, other = unique("window"), unique("other")
    async with session_through(tmp_path, documents=windowed) as session:
        first = await session.call_tool("createNote", note(title))
    async with session_through(tmp_path, documents=windowed) as session:  # a reconnect
        again = await session.call_tool("createNote", note(title))
        different = await session.call_tool("createNote", note(other))
    upstream = Upstream(tmp_path / "state")
    assert meta_of(first)["callgate/route"] == "return_result", text_of(first)
    assert meta_of(again)["callgate/route"] == "return_receipt", text_of(again)
    assert meta_of(again)["callgate/operation_id"] == meta_of(first)["callgate/operation_id"]
    assert meta_of(different)["callgate/route"] == "return_result"
    assert len(upstream.notes(title)) == 1 and len(upstream.notes(other)) == 1


async def test_start_up_warns_of_a_verify_field_the_output_schema_lacks(
        tmp_path: Path) -> None:
    documents = tmp_path / "documents"
    shutil.copytree(CONFIG, documents)
    contract = documents / "contracts" / "createNote.yaml"
    contract.write_text(contract.read_text().replace(
        "expression: result.title == args.title",
        "expression: result.structuredContent.title == args.title"))
    parameters = StdioServerParameters(command=GATEWAY[0], args=[
        *GATEWAY[1:], "--upstream-command",
        upstream_command(tmp_path / "state") + " --output-schema",
        "--store", f"sqlite:///{tmp_path / 'store.sqlite3'}", "--actor", str(ACTOR_FILE),
        str(documents / "contracts"), str(documents / "policies")], cwd=str(REPO))
    with (tmp_path / "gateway.log").open("a") as errlog:
        async with stdio_client(parameters, errlog) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
    log = (tmp_path / "gateway.log").read_text()
    line = next(line for line in log.splitlines() if "warning:" in line)
    verify_line = contract.read_text().splitlines().index("  verify:") + 1
    assert f"{contract}:{verify_line}: createNote verify reads result.structuredContent" \
        in line, log


def test_init_from_mcp_keeps_the_output_schema(tmp_path: Path) -> None:
    import yaml

    drafted = tmp_path / "drafted"
    done = subprocess.run(
        [GATEWAY[0], "-m", "callgate_rules.cli", "init", str(drafted), "--from-mcp",
         upstream_command(tmp_path / "state") + " --output-schema"],
        cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    contract = yaml.safe_load((drafted / "contracts" / "createNote.yaml").read_text())
    assert contract["spec"]["result"]["properties"]["title"] == {"type": "string"}
    assert "result" not in yaml.safe_load(
        (drafted / "contracts" / "findNote.yaml").read_text())["spec"]
    # lint then names a verify field the upstream's output schema lacks, at file:line:col
    path = drafted / "contracts" / "createNote.yaml"
    path.write_text(path.read_text().replace("idempotency: FILL-IN", "idempotency: key")
                    .replace("  examples:", "  verify:\n    expression: "
                             "has(result.structuredContent.id)\n  examples:"))
    linted = subprocess.run([GATEWAY[0], "-m", "callgate_rules.cli", "lint",
                             str(drafted / "contracts"), str(drafted / "policies")],
                            cwd=REPO, capture_output=True, text=True, timeout=60)
    [finding] = [line for line in linted.stdout.splitlines() if "unknown-field" in line]
    assert "createNote.yaml:" in finding and "result.structuredContent" in finding


def _namespaced(text: str, name: str) -> str:
    for tool in ("createNote", "getNotebook", "sendMessage", "findNote"):
        text = text.replace(f"name: {tool}\n", f"name: {name}__{tool}\n") \
            .replace(f"collection: {tool},", f"collection: {name}__{tool},") \
            .replace(f"tool: {tool}\n", f"tool: {name}__{tool}\n")
    return text


async def test_several_upstreams_behind_one_gateway_with_namespaced_tools(
        tmp_path: Path) -> None:
    documents = tmp_path / "documents"
    shutil.copytree(CONFIG, documents)
    contracts = documents / "contracts"
    for path in contracts.glob("*.yaml"):
        path.write_text(_namespaced(path.read_text(), "notes"))
    (contracts / "archive_createNote.yaml").write_text(
        _namespaced((CONFIG / "contracts" / "createNote.yaml").read_text(), "archive"))
    policy = documents / "policies" / "access.yaml"
    policy.write_text(policy.read_text()
                      .replace("tools: [createNote, getNotebook]",
                               "tools: [notes__createNote, notes__getNotebook, "
                               "archive__createNote]")
                      .replace("tools: [sendMessage]", "tools: [notes__sendMessage]"))
    parameters = StdioServerParameters(command=GATEWAY[0], args=[
        *GATEWAY[1:],
        "--upstream", f"notes={upstream_command(tmp_path / 'notes')} --text-only",
        "--upstream", f"archive={upstream_command(tmp_path / 'archive')}",
        "--store", f"sqlite:///{tmp_path / 'store.sqlite3'}", "--actor", str(ACTOR_FILE),
        str(contracts), str(documents / "policies")], cwd=str(REPO))
    title = unique("several")
    with (tmp_path / "gateway.log").open("a") as errlog:
        async with stdio_client(parameters, errlog) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                listed = sorted(tool.name for tool in (await session.list_tools()).tools)
                to_notes = await session.call_tool("notes__createNote", note(title))
                to_archive = await session.call_tool("archive__createNote", note(title))
                hidden = await session.call_tool("notes__deleteEverything", {})
    assert listed == ["archive__createNote", "notes__createNote", "notes__getNotebook",
                      "notes__sendMessage"]
    assert meta_of(to_notes)["callgate/route"] == "return_result", text_of(to_notes)
    assert meta_of(to_archive)["callgate/route"] == "return_result", text_of(to_archive)
    assert len(Upstream(tmp_path / "notes").notes(title)) == 1
    assert len(Upstream(tmp_path / "archive").notes(title)) == 1
    assert hidden.is_error  # a tool without a contract stays hidden, on every upstream
    assert Upstream(tmp_path / "notes").calls("deleteEverything") == []
