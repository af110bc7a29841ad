"""The HTTP server's side of the request bounds: headers that never finish arriving.

The ASGI application first sees a request once its headers are complete, so a client
that sends them a byte at a time (or never ends them) would hold a connection forever
where no middleware can see it. ``header_deadline_protocol`` gives uvicorn's h11 protocol
a deadline: from a connection's first moment (or from the first byte of a later request on
a kept-alive connection) the headers must be complete within ``seconds``, else the
client is answered 408 and the connection closed. The body's own deadline is
``RequestLimits``' (``server.problems``); idle kept-alive connections are uvicorn's
``timeout_keep_alive``.
"""

from __future__ import annotations

import asyncio
import json
import logging

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from callgate_rules.server.problems import PROBLEM_TYPE, problem_body

LOGGER = logging.getLogger("callgate.server")


def header_deadline_protocol(seconds: float) -> type[H11Protocol]:
    """uvicorn's h11 protocol, with headers due within ``seconds``."""

    class HeaderDeadline(H11Protocol):
        header_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
                self._arm()  # a request's headers are on their way (or none yet)
            else:
                self._disarm()  # the headers are in: the body's deadline is the app's

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _arm(self) -> None:
            if self.header_timer is None:
                self.header_timer = self.loop.call_later(seconds, self._headers_late)

        def _disarm(self) -> None:
            if self.header_timer is not None:
                self.header_timer.cancel()
                self.header_timer = None

        def _headers_late(self) -> None:
            self.header_timer = None
            if self.transport.is_closing() or self.conn.their_state is not h11.IDLE:
                return
            if self.conn.our_state is not h11.IDLE:  # an answer is being written: let it
                return
            LOGGER.warning("%s: no complete request headers within %gs; connection closed",
                           self.client[0] if self.client else "a client", seconds)
            body = json.dumps(problem_body(
                408, "Headers too slow", f"the request headers did not arrive within "
                f"{seconds:g}s")).encode()
            self.transport.write(
                b"HTTP/1.1 408 Request Timeout\r\ncontent-type: " + PROBLEM_TYPE.encode()
                + b"\r\ncontent-length: " + str(len(body)).encode()
                + b"\r\nconnection: close\r\n\r\n" + body)
            self.transport.close()

    return HeaderDeadline
