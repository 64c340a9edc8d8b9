"""Progress on a terminal for long transfers (`toolgate audit export`): records, bytes
and rate on one line of stderr, redrawn at most a few times a second, then a one-line
summary. Nothing at all when stderr is not a terminal (a pipe, a log, a CI job)."""

from __future__ import annotations

import sys
from time import monotonic
from typing import TextIO


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"  # pragma: no cover


class Progress:
    """Counts records (lines; `header_lines` are not records) and bytes as chunks pass.
    `live`: redraw a progress line (only when the data itself is not going to the same
    terminal); `summary`: the closing line. Both default to whether `stream` is a tty."""

    def __init__(self, *, stream: TextIO | None = None, live: bool | None = None,
                 summary: bool | None = None, header_lines: int = 0,
                 interval: float = 0.25) -> None:
        self.stream = stream or sys.stderr
        tty = self.stream.isatty()
        self.summary = tty if summary is None else summary
        self.live = (tty and not sys.stdout.isatty()) if live is None else live
        self.records = -header_lines
        self.bytes = 0
        self.interval = interval
        self._started = self._drawn = monotonic()

    def __call__(self, chunk: bytes) -> None:
        self.bytes += len(chunk)
        self.records += chunk.count(b"\n")
        if self.live and monotonic() - self._drawn >= self.interval:
            self._drawn = monotonic()
            self.stream.write("\r" + self.line() + "\x1b[K")
            self.stream.flush()

    def line(self) -> str:
        seconds = max(monotonic() - self._started, 1e-9)
        records = max(self.records, 0)
        return (f"{records} records, {_size(self.bytes)} in {seconds:.1f} s "
                f"({records / seconds:.0f} records/s, {_size(self.bytes / seconds)}/s)")

    def done(self) -> None:
        if self.live:
            self.stream.write("\r\x1b[K")
        if self.summary:
            self.stream.write(f"exported {self.line()}\n")
        self.stream.flush()
