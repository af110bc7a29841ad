"""The upstream's stdio transport, its answers bounded in bytes: the MCP SDK's
``stdio_client`` with a reader (``_Lines``) that stops reading a line at the bound, drops
the rest of it unparsed and answers the call it belonged to with ``ANSWER_TOO_LARGE`` at
once (``gateway.upstream`` tells it apart as ``AnswerTooLarge``).
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, TextIO

import anyio
import anyio.lowlevel
import mcp_types as types
from mcp import StdioServerParameters
from mcp.shared.message import SessionMessage

# The JSON-RPC error code the bounded transport answers an oversized answer with (in the
# range JSON-RPC leaves to implementations).
ANSWER_TOO_LARGE = -32090


class _Lines:
    """The upstream's stdout cut into lines, each held to ``limit`` bytes: a longer line is
    dropped as it arrives (never held whole, never parsed) and stands for a JSON-RPC error
    answer to the request it answered, found by the ``id`` at its head."""

    _ID = re.compile(rb'"id"\s*:\s*("(?:[^"\\]|\\.)*"|-?\d+)')
    _HEAD = 512  # the bytes kept of a dropped line, to find its id

    def __init__(self, limit: int, encoding: str, errors: str) -> None:
        self.limit, self.encoding, self.errors = limit, encoding, errors
        self.buffer = bytearray()
        self.head: bytes | None = None  # set while a line over the limit is dropped

    def feed(self, chunk: bytes) -> list[SessionMessage | Exception]:
        found: list[SessionMessage | Exception] = []
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            piece = chunk[start:] if end < 0 else chunk[start:end]
            if self.head is None and len(self.buffer) + len(piece) > self.limit:
                self.head = bytes(self.buffer[:self._HEAD]) + piece[:self._HEAD]
                self.buffer.clear()
            elif self.head is None:
                self.buffer += piece
            if end < 0:
                return found
            if self.head is not None:
                found.append(self._too_large(self.head))
                self.head = None
            elif self.buffer.strip():
                found.append(_parse_line(bytes(self.buffer).decode(self.encoding,
                                                                   self.errors)))
            self.buffer.clear()
            start = end + 1

    def _too_large(self, head: bytes) -> SessionMessage | Exception:
        match = self._ID.search(head)
        # the id of the message itself, not one inside its result or parameters
        body = min((at for at in (head.find(b'"result"'), head.find(b'"params"'),
                                  head.find(b'"error"')) if at >= 0), default=len(head))
        if match is None or match.start() > body:
            return ValueError(f"an upstream message of more than {self.limit:,} bytes was "
                              "dropped unread")
        message = {"jsonrpc": "2.0", "id": json.loads(match.group(1)), "error": {
            "code": ANSWER_TOO_LARGE,
            "message": f"the answer was more than {self.limit:,} bytes; it was not read"}}
        return _parse_line(json.dumps(message))


def _parse_line(line: str) -> SessionMessage | Exception:
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_json(line,
                                                                          by_name=False))
    except ValueError as error:
        return error


@asynccontextmanager
async def bounded_stdio(server: StdioServerParameters, errlog: TextIO,
                         limit: int) -> AsyncIterator[Any]:
    """The MCP SDK's ``stdio_client`` with a bounded reader (``_Lines``): the process is
    started, fed and stopped by the SDK's own functions; only stdout is read here, so an
    answer of 40 MB is dropped as it streams in instead of being held and parsed whole."""
    from mcp.client import stdio as sdk  # its process handling (spawn, tree kill, drain)

    command = await sdk._get_executable_command(server.command)
    process = await sdk._create_platform_compatible_process(
        command=command, args=server.args,
        env=sdk.get_default_environment() | (server.env or {}), errlog=errlog,
        cwd=server.cwd)
    read_writer, read_stream = anyio.create_memory_object_stream[
        SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)
    writer_done = anyio.Event()
    lines = _Lines(limit, server.encoding, server.encoding_error_handler)

    async def stdout_reader() -> None:
        assert process.stdout is not None
        try:
            async with read_writer:
                try:
                    while True:
                        try:
                            chunk = await process.stdout.receive()
                        except anyio.EndOfStream:
                            return
                        for message in lines.feed(chunk):
                            try:
                                await read_writer.send(message)
                            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                                return
                finally:
                    await sdk._drain_stdout(process)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, ConnectionError):
            pass  # the session sees the read stream close: the connection is lost

    async def stdin_writer() -> None:
        assert process.stdin is not None
        try:
            async with write_reader:
                async for message in write_reader:
                    text = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await process.stdin.send((text + "\n").encode(
                        server.encoding, server.encoding_error_handler))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await read_writer.aclose()
        finally:
            writer_done.set()

    async def shutdown() -> None:
        read_stream.close()
        write_stream.close()
        with anyio.move_on_after(0.5):
            await writer_done.wait()
        await sdk._stop_server_process(process)
        for stream in (read_stream, write_stream, read_writer, write_reader):
            await stream.aclose()
        await anyio.lowlevel.checkpoint()

    async with anyio.create_task_group() as group:
        group.start_soon(stdout_reader)
        group.start_soon(stdin_writer)
        try:
            yield read_stream, write_stream
        finally:
            with anyio.CancelScope(shield=True):
                await shutdown()
            group.cancel_scope.cancel()

