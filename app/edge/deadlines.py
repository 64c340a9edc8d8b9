"""The HTTP edge's limits (app/edge/limits.py, the app's `edge`) as toolgate's HTTP protocol
(app/edge/connection.py) enforces them on every request, whichever route it is for:

- a head past its size or header count: 431, also while it is still arriving (what the
  parser holds of an unfinished head is bounded, not only what it completed);
- a head not complete within header_timeout of its first byte, a body not complete within
  body_timeout of its head (while reading is not paused: then the server, not the client,
  is slow): 408, and the connection closes;
- a connection idle past the keep-alive wait (also a new one that sends nothing): closed;
- past max_connections per worker: the connection waiting longest on its client is closed
  (503 if it was sending a request), else the new one gets 503 at once;
- an answer given before its request's body was read (a 413) leaves the rest of that body
  to be read and dropped, within bounds; and a connection closed with data still coming is
  closed the lingering way (our side shut for writing, what arrives dropped until the
  client closes or a bound is reached): closing at once would make the kernel reset the
  connection, and a client still sending would never read its answer.

Each connection has one timer, which looks at what the connection is doing when it fires
(`_phase` and since when: a few attribute writes per request, no timer per request). The
mixin keeps this policy apart from the parsing and the ASGI cycle; its state is the
connection's own.
"""

from __future__ import annotations

import heapq
import logging
import time
from typing import Any

from app.edge.cycle import STATUS_LINE
from app.edge.logs import request_id_of

log = logging.getLogger("uvicorn.error")

# What a connection is doing, for its timer and the connection cap: waiting for a request
# (IDLE), receiving a request's head (HEAD) or body (BODY), waiting for the app's answer
# (WAIT: no deadline of ours), or on its way out: dropping what arrives until the
# answer in flight is out (DISCARD), lingering after its answer (LINGER), refused at the
# cap (REFUSED). From DISCARD on, what arrives is dropped unparsed.
IDLE, HEAD, BODY, WAIT, DISCARD, LINGER, REFUSED = range(7)
# What a refused connection may still read while its client reads the 503.
_REFUSED_DRAIN = 65536


class Stop(Exception):
    """Raised in a parser callback to stop parsing: the connection is being closed."""


_refusals = [0]  # refused connections of this process still waiting to close
_rendered: dict[tuple, bytes] = {}  # see error
_warned = [0.0]  # when the last warning about the connection cap was logged


class Deadlines:
    """The limits' half of HttpProtocol (which sets transport, loop, edge, cycle,
    connections, keep_alive_wait, headers, read_paused)."""

    transport: Any
    loop: Any
    edge: Any
    cycle: Any
    connections: set
    keep_alive_wait: float
    headers: list[tuple[bytes, bytes]]
    read_paused: bool
    default_lines: Any

    def init_deadlines(self) -> None:
        edge = self.edge
        # The timer looks again at least this often (see _on_timer).
        self._tick = max(0.05, min(t for t in (self.keep_alive_wait, edge.header_timeout,
                                               edge.body_timeout, edge.drain_seconds or 60.0)
                                   if t > 0))
        self._phase, self._since = IDLE, 0.0
        self._timer: Any = None
        self._chunk = 0  # the size of the data being parsed
        self._head_bytes = self._head_raw = 0
        self._drain_left = edge.drain_bytes

    # --- the phases, as the connection moves through them --------------------------------

    def start_timer(self) -> None:
        self._phase, self._since = IDLE, self.loop.time()
        self._timer = self.loop.call_at(self._since + self.keep_alive_wait, self._on_timer)

    def stop_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def began_head(self) -> None:
        self._phase, self._since = HEAD, self.loop.time()
        self._head_bytes = 0
        self._head_raw = -self._chunk  # this chunk is counted by the callbacks

    def began_body(self) -> None:
        self._phase, self._since = BODY, self.loop.time()

    def went_idle(self) -> None:
        self._phase, self._since = IDLE, self.loop.time()

    def answered_early(self) -> None:
        self._drain_left = self.edge.drain_bytes  # and the body deadline still runs

    def in_flight(self) -> bool:
        cycle = self.cycle
        return cycle is not None and not cycle.response_complete

    def discard(self) -> None:
        """Drop what arrives from now on, unparsed; the answer in flight still goes out
        (then the connection closes, lingering)."""
        self._phase, self._since = DISCARD, self.loop.time()

    def dropped(self, size: int) -> None:
        """`size` bytes arrived on a connection on its way out."""
        self._drain_left -= size
        if self._drain_left < 0:
            self.transport.close()

    def drained(self, size: int) -> bool:
        """Body bytes of a request answered already; False once past the bound (then the
        connection lingers)."""
        self._drain_left -= size
        if self._drain_left < 0:
            self.linger()
            return False
        return True

    def close_after_answer(self) -> None:
        """Close once an answer is out: at once, or, when the request's body or another
        request is still coming, lingering."""
        if self._phase in (HEAD, BODY, DISCARD):
            self.linger()
        elif not self.transport.is_closing():
            self.transport.close()

    def linger(self) -> None:
        """Shut our side for writing (after what is queued: the answer) and drop whatever
        arrives, until the client closes, drain_max_bytes have arrived or drain_seconds
        have passed: a close with unread data would reset the connection, and a client
        still sending would lose the answer."""
        transport = self.transport
        if self._phase >= LINGER or transport.is_closing():
            return
        self._phase, self._since = LINGER, self.loop.time()
        self._drain_left = self.edge.drain_bytes
        if self.read_paused:
            self.read_paused = False
            transport.resume_reading()
        if not transport.can_write_eof() or self.edge.drain_seconds <= 0:
            transport.close()
            return
        transport.write_eof()
        self._rearm(self._since + self.edge.drain_seconds)

    # --- the one timer -------------------------------------------------------------------

    def _rearm(self, when: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = self.loop.call_at(when, self._on_timer)

    def _on_timer(self) -> None:
        """The connection's one timer: acts on an overdue phase, or looks again when the
        current phase's deadline (or the next tick) comes."""
        self._timer = None
        if self.transport.is_closing():
            return
        now = self.loop.time()
        phase, edge = self._phase, self.edge
        if phase == IDLE:
            due: float | None = self._since + self.keep_alive_wait
        elif phase == HEAD:
            due = self._since + edge.header_timeout
        elif phase == BODY:
            # Not while reading is paused: then it is us, not the client, who is slow.
            due = None if self.read_paused else self._since + edge.body_timeout
        elif phase == DISCARD:
            due = None if self.in_flight() else self._since + edge.drain_seconds
        elif phase == WAIT:
            due = None
        else:
            due = self._since + (edge.drain_seconds if phase == LINGER
                                 else min(1.0, edge.drain_seconds))
        if due is not None and now >= due:
            self._expire(phase)
            return
        self._timer = self.loop.call_at(
            now + self._tick if due is None else min(due, now + self._tick), self._on_timer)

    def _expire(self, phase: int) -> None:
        edge = self.edge
        if phase == HEAD:
            self.shed(408, "request_timeout", "the request's headers did not arrive within "
                      f"{edge.header_timeout:g} s")
        elif phase == BODY:
            self.shed(408, "request_timeout", "the request's body did not arrive within "
                      f"{edge.body_timeout:g} s")
        else:  # idle past the keep-alive wait, or done lingering
            self.transport.close()

    def shed(self, status: int, code: str, message: str, **headers: str) -> None:
        """Close a connection whose client is still sending a request (too slowly, or the
        connection cap needs its place), answering `status` unless an answer is already
        on its way, which is let out first."""
        cycle = self.cycle
        if self._phase == HEAD and self.in_flight():  # a request pipelined behind one
            cycle.keep_alive = False  # whose answer goes out first, then the connection closes
            self.discard()
            return
        if cycle is not None and self._phase == BODY:
            started = cycle.response_started
            cycle.disconnected = True  # the app's receive() ends; nothing more is written
            event = getattr(cycle, "event", None)
            if event is not None:
                event.set()
            if started:
                self.transport.close()
                return
        self.transport.write(self.error(status, code, message, headers))
        self.transport.close()

    # --- the head's size ---------------------------------------------------------------

    def refuse_head(self, *, too_many: bool) -> None:
        """431 for a head past the limits, then the connection closes (lingering: the
        client may still be sending it)."""
        from app.edge import limits

        exc = limits.too_many_headers(self.edge) if too_many else \
            limits.head_too_large(self.edge)
        if self.in_flight():  # the answer before it goes out first, then the close
            self.cycle.keep_alive = False
            self.discard()
            return
        self.transport.write(self.error(exc.status, exc.code, exc.message, None,
                                        exc.details))
        self.linger()

    # --- the connection cap --------------------------------------------------------------

    def evict(self) -> bool:
        """At the cap: close the connections that have waited longest on their clients, a
        few at a time; False when none is waiting on its client (every one waits for an
        answer of ours) and the new one must be refused. First those only waiting to
        close, then those still sending a request (oldest first: a slow client's), then
        those idle after an answer, and new ones that have sent nothing yet last (a client
        that just connected has had no chance to send its request)."""
        candidates = []
        for other in self.connections:
            phase = getattr(other, "_phase", WAIT)
            if phase == WAIT or phase == DISCARD or other.transport.is_closing():
                continue
            if phase == BODY and other.read_paused:
                continue  # waiting on us, not on its client
            if phase == HEAD and other.in_flight():
                continue
            rank = (0 if phase == LINGER else 1 if phase != IDLE
                    else 2 if other.cycle is not None else 3)  # (no cycle: nothing sent yet)
            candidates.append((rank, other._since, id(other), other))
        if not candidates:
            return False
        batch = max(1, self.edge.max_connections // 64)
        for _, _, _, other in heapq.nsmallest(batch, candidates):
            self.connections.discard(other)  # its place is free now
            other._evicted()
        return True

    def _evicted(self) -> None:
        if self._phase in (HEAD, BODY):
            self.shed(503, "unavailable", "the server is at its connection limit and this "
                      "connection waited longest for its client; retry", **{"Retry-After": "1"})
        else:
            self.transport.close()

    def refuse_connection(self, transport: Any) -> None:
        """Past the cap with no connection to close: 503 at once, before the request is
        read; our side is then shut and what arrives dropped for up to a second (so the
        client reads the 503, not a reset), unless too many refusals wait already."""
        self.transport = transport
        edge = self.edge
        now = time.monotonic()
        if now - _warned[0] > 10:
            _warned[0] = now
            log.warning("connection limit (%d per worker) reached: refusing new "
                        "connections with 503 (TOOLGATE_MAX_CONNECTIONS)", edge.max_connections)
        transport.write(self.error(503, "unavailable", "the server is at its connection "
                                   f"limit ({edge.max_connections}); retry", {
                                       "Retry-After": "1"}))
        if _refusals[0] >= edge.lingering_refusals or not transport.can_write_eof():
            transport.close()
            self._phase = DISCARD
            return
        _refusals[0] += 1
        self._phase, self._since = REFUSED, self.loop.time()
        self._drain_left = min(edge.drain_bytes, _REFUSED_DRAIN)
        transport.write_eof()
        self._timer = self.loop.call_at(self._since + min(1.0, edge.drain_seconds),
                                        self._on_timer)

    def lost_refused(self) -> bool:
        """connection_lost of a connection refused at the cap (True): nothing else to do."""
        if self._phase == REFUSED:
            _refusals[0] -= 1
            self._phase = DISCARD  # counted once
            self.stop_timer()
            return True
        return False

    # --- the edge's own answers ----------------------------------------------------------

    def error(self, status: int, code: str, message: str, headers: dict[str, str] | None,
              details: dict[str, Any] | None = None) -> bytes:
        """An answer in the one envelope, with `connection: close`. Rendered once per
        kind (a refusal at the cap may be answered many times a second): only the default
        lines (the date) and the request id are added each time."""
        key = (status, code, message, tuple((headers or {}).items()),
               tuple((details or {}).items()))
        rendered = _rendered.get(key)
        if rendered is None:
            from app.edge.handlers import envelope

            response = envelope(status, code, message, details, headers=headers or None)
            rendered = b"".join([b"%s: %s\r\n" % pair for pair in response.raw_headers]
                                + [b"connection: close\r\n\r\n", response.body])
            if len(_rendered) >= 64:
                _rendered.clear()
            _rendered[key] = rendered
        return b"".join((STATUS_LINE[status], self.default_lines(), b"x-request-id: ",
                         request_id_of(self._sent_request_id()), b"\r\n", rendered))

    def _sent_request_id(self) -> bytes | None:
        """The X-Request-ID of the request being read, if its head has come that far."""
        for name, value in self.headers or ():
            if name == b"x-request-id":
                return value
        return None
