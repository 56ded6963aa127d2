"""A small HTTP service with a leak behind a flag, to try ``leak-harness record`` on.

The launcher starts one worker process (multiprocessing, spawn) that answers
``POST /echo`` on 127.0.0.1, then drives it with a bounded client until the
launcher is stopped (SIGINT or SIGTERM) or ``--requests`` are done. With
``--leak`` the worker keeps every request body in a module-level dict that
nothing bounds: plain retention in a child process, the kind RSS shows after
hours in production::

    python examples/leaky_service.py --leak --requests 2000
    leak-harness record --duration 30s --follow-children -- \\
        python examples/leaky_service.py --leak

The worker counts its requests for the recorder (``harness.record.ops``)
behind a guarded import: without the harness the service runs unchanged.
"""

from __future__ import annotations

import argparse
import http.server
import multiprocessing
import os
import time
import urllib.request
from multiprocessing.connection import Connection
from typing import Any

try:
    from harness import record
except ImportError:  # the service does not need the harness
    record = None  # type: ignore[assignment]

SEEN: dict[int, bytes] = {}  # with --leak: every request body, never dropped


def remember(body: bytes) -> None:
    SEEN[len(SEEN)] = body


class EchoHandler(http.server.BaseHTTPRequestHandler):
    leak = False

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        if self.leak:
            remember(body)
        reply = body[:16]
        self.send_response(200)
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)
        if record is not None:
            record.ops(1)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # one line per request would drown the launcher's output


def serve(port_to: Connection, leak: bool) -> None:
    """The worker: answer requests until the launcher stops it."""
    EchoHandler.leak = leak
    server = http.server.HTTPServer(("127.0.0.1", 0), EchoHandler)
    port_to.send(server.server_address[1])
    port_to.close()
    try:
        server.serve_forever(poll_interval=0.1)
    except KeyboardInterrupt:
        pass  # Ctrl-C reaches the whole process group
    finally:
        server.server_close()


def drive(port: int, requests: int, body_bytes: int, pause_s: float) -> int:
    """POST ``requests`` bodies of ``body_bytes`` random bytes; how many were answered."""
    url = f"http://127.0.0.1:{port}/echo"
    done = 0
    for _ in range(requests):
        call = urllib.request.Request(url, data=os.urandom(body_bytes), method="POST")
        with urllib.request.urlopen(call, timeout=10) as reply:
            reply.read()
        done += 1
        time.sleep(pause_s)
    return done


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--leak", action="store_true", help="keep every request body")
    parser.add_argument("--requests", type=int, default=1_000_000, help="then stop")
    parser.add_argument("--body-bytes", type=int, default=4096)
    parser.add_argument("--pause", type=float, default=0.004, help="seconds between requests")
    args = parser.parse_args(argv)
    spawn = multiprocessing.get_context("spawn")
    launcher_end, worker_end = spawn.Pipe()
    worker = spawn.Process(target=serve, args=(worker_end, args.leak), name="echo-worker")
    worker.start()
    port = launcher_end.recv()
    done = 0
    try:
        done = drive(port, args.requests, args.body_bytes, args.pause)
    except KeyboardInterrupt:
        pass
    finally:
        worker.terminate()  # SIGTERM: the worker exits (and its recording ends) cleanly
        worker.join(10)
    print(f"leaky_service: {done} requests answered" if done else "leaky_service: stopped")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
