"""The decision log's writer process: `python -m app.log.writer`. A worker on its own
starts one as its child (stdin/stdout); `toolgate serve --workers N` starts one for all its
workers (`--listen SOCKET`, one connection per worker, same protocol).

Why a process: the group commit's own work (hashing the chain, binding ~20 columns a row,
the database driver) used to run in the worker, on a thread or as a task. Either way it
took the worker's GIL or event loop from the requests, and a request whose record waited
behind other requests' work waited longer still: durable logging cost half the throughput.
In its own process the writer runs on another core and the worker only serialises each
record (orjson: its detail as canonical text, then the frame; ~4 µs) and reads one
acknowledgement per batch.

Protocol, one JSON document per line (orjson never writes a raw newline):
  stdin   first line: the configuration (see `open_store`), never on the command line
          where `ps` would show a database password
          then frames: [frame_id, [record, ...]]   (the records of one or more requests;
          a record's created_at is ISO text or integer nanoseconds since the epoch)
  stdout  per frame, once its records are committed or have failed:
          [frame_id, null | "why it failed", commits_so_far]
With --listen, stdin carries only the configuration, and frames and acknowledgements travel
over each worker's connection to the socket.
End of stdin: whatever was read is committed and acknowledged, then the process exits. That
is also what happens when the worker dies: nothing it sent is lost, and nothing it did not
send was answered. SIGINT/SIGTERM are ignored so that a Ctrl-C to the process group lets the
worker drain first; the writer leaves when the worker closes the pipe.

Frames are committed whole and in order; consecutive frames share one transaction up to
`max_batch` records. On SQLite the chain is extended under the `chain_head` row lock
exactly as `app.log.decision_log.append` does it inside request transactions; on Postgres in
one statement that moves the head only from where this writer last left it (see
PostgresStore). Either way every process's records form one chain. Imports are kept light
(no SQLAlchemy): the process starts in ~50 ms.

With a signing key in the configuration, the loop also signs a checkpoint of the chain
head between two commits every interval in which the log grew (Checkpoints in loop.py;
the format is app/log/checkpoints.py): one signature per interval, none per record.

The package, one module per concern:
  loop.py        the frame loop: Source, Writer, Checkpoints, InProcess, serve and main
  sqlite.py      the SQLite store
  postgres.py    the Postgres store
  summariser.py  the Postgres store's BRIN summaries
  common.py      what both stores share
  start.py       the other side: the configuration and start-up of a writer process, for
                 the processes that start one (the writer itself never imports it)
"""
