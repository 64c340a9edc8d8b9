"""What refusing duplicate keys (app/edge/jsonkeys.py, SPEC §17) costs the authorize decode,
in one run: the hot path's one msgspec pass with and without the proof, for a body whose
members all differ from their defaults (the Struct's own count proves it), for bench's usual
body (it sends `step_retry_count: 0`, so the plain count proves it), and for the orjson way
that every other route takes. CPU time per call, best of several runs.

    .venv/bin/python -m bench.dupkeys
"""

from __future__ import annotations

import time
import timeit
from collections.abc import Callable

import orjson

from app.authorize import wire
from app.edge.jsonkeys import refuse_duplicates
from bench.payload import AUTHORIZE, BODY

NO_DEFAULTS = orjson.dumps({**AUTHORIZE, "context": {
    k: v for k, v in AUTHORIZE["context"].items() if k != "step_retry_count"}})


def best_us(call: Callable[[], object], *, repeat: int = 9) -> float:
    timer = timeit.Timer(call, timer=time.process_time)
    number, _ = timer.autorange()
    number = max(number, 20_000)
    return min(timer.repeat(repeat=repeat, number=number)) / number * 1e6


def main() -> None:
    proof = wire._no_duplicate_key
    rows = []
    for name, body in (("members all set", NO_DEFAULTS), ("bench body", BODY)):
        assert wire.decode_authorize_json(body) is not None
        with_check = best_us(lambda b=body: wire.decode_authorize_json(b))
        wire._no_duplicate_key = lambda raw, decoded: True  # type: ignore[assignment]
        try:
            without = best_us(lambda b=body: wire.decode_authorize_json(b))
        finally:
            wire._no_duplicate_key = proof  # type: ignore[assignment]
        rows.append((f"one pass, {name}", without, with_check))
    loads = best_us(lambda: orjson.loads(BODY))
    checked = best_us(lambda: refuse_duplicates(BODY, orjson.loads(BODY)))
    rows.append(("orjson.loads (other routes)", loads, checked))
    print(f"{'decode':32} {'before µs':>10} {'after µs':>10} {'ratio':>7}")
    for name, before, after in rows:
        print(f"{name:32} {before:10.2f} {after:10.2f} {after / before:7.2f}")


if __name__ == "__main__":
    main()
