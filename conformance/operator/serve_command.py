"""``lmckv serve``: the reference LMCache cache server (lm:// protocol, SPEC.md "Server
behaviour") on loopback until SIGTERM or SIGINT. It prints ``listening on HOST:PORT`` once it
accepts connections. Exit status: 0 stopped, 1 the address cannot be bound, 2 usage.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence

from ...reference_impl.protocol.server import (
    DEFAULT_CAPACITY,
    DEFAULT_IDLE_TIMEOUT,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_WAIT_TIMEOUT,
    ServerConfig,
    serve,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lmckv serve",
        description="Run the reference LMCache cache server (lm:// protocol). It prints "
        "'listening on HOST:PORT' once it accepts connections; SIGTERM stops it.",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, required=True, help="port (0: any free port)")
    parser.add_argument(
        "--capacity-bytes",
        type=int,
        default=DEFAULT_CAPACITY,
        help="payload bytes stored at most; least recently used values are evicted",
    )
    parser.add_argument("--max-connections", type=int, default=DEFAULT_MAX_CONNECTIONS)
    parser.add_argument(
        "--idle-timeout",
        type=float,
        default=DEFAULT_IDLE_TIMEOUT,
        help="seconds a connection may stall inside a request: the header from its first "
        "byte, each 256 KiB of a payload, each 64 KiB of a reply",
    )
    parser.add_argument(
        "--wait-timeout",
        type=float,
        default=DEFAULT_WAIT_TIMEOUT,
        help="seconds a connection may wait before the first byte of a request",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        config = ServerConfig(
            args.host,
            args.port,
            args.capacity_bytes,
            args.max_connections,
            args.idle_timeout,
            args.wait_timeout,
        )
    except ValueError as exc:
        print(f"lmckv serve: {exc}", file=sys.stderr)
        return 2

    def ready(host: str, port: int) -> None:
        print(f"lmckv serve: listening on {host}:{port}", flush=True)

    try:
        asyncio.run(serve(config, ready))
    except OSError as exc:
        print(f"lmckv serve: {exc}", file=sys.stderr)
        return 1
    return 0
