"""A server under test, driven by the suite as a client over loopback TCP (SPEC "The
protocol on a connection", PROTO-SRV-*). Values are checked byte for byte; every hostile
case ends with a canary client checking that the server still serves others. Every loop is
bounded in count and every socket operation in time (wire_client.IO_TIMEOUT)."""

from __future__ import annotations

import contextlib
import itertools
import math
import threading
import time

import pytest

from ..drivers.server_driver import ServerDriver
from .wire_client import (
    CLIENT_HEADER,
    DTYPE_SIZE,
    EXIST,
    FAIL,
    GET,
    HEALTH,
    LIST,
    PUT,
    SUCCESS,
    Conn,
    ConnectionClosed,
    canary,
    header,
    payload,
    unique_key,
)

rule = pytest.mark.rule

# -- round trips ----------------------------------------------------------------------------

#: (id, fmt, dtype id, shape slots, byte length or None to derive it from the shape).
_FORMATS: list[tuple[str, int, int, tuple[int, int, int, int], int | None]] = [
    ("kv_2ltd", 1, 3, (2, 2, 16, 8), None),
    ("kv_t2d", 2, 3, (16, 2, 8, 0), None),
    ("kv_2td", 3, 3, (2, 16, 8, 0), None),
    ("kv_mla", 6, 3, (1, 2, 16, 8), None),
    ("ec_td", 7, 3, (16, 8, 0, 0), None),
    ("hs_td", 8, 3, (16, 8, 0, 0), None),
    ("binary", 4, 6, (100, 0, 0, 0), 100),
    ("binary_buffer", 5, 6, (100, 0, 0, 0), 100),
    ("undefined", 0, 0, (0, 0, 0, 0), 37),
]
_DTYPES = {
    "f16-legacy-id": 1,
    "f16": 2,
    "bf16": 3,
    "f32": 4,
    "f64": 5,
    "u8": 6,
    "fp8e4m3": 7,
    "fp8e5m2": 8,
}
_SHAPES = {
    "page-16-tokens": (2, 1, 16, 64),
    "chunk-256-tokens": (2, 1, 256, 64),
    "empty-zero-tokens": (2, 1, 0, 64),
    "rank-1": (4096, 0, 0, 0),
}
ROUNDTRIPS = (
    [(f"fmt-{n}", f, d, s, ln) for n, f, d, s, ln in _FORMATS]
    + [(f"dtype-{n}", 1, d, (2, 2, 16, 8), None) for n, d in _DTYPES.items()]
    + [(f"shape-{n}", 1, 3, s, None) for n, s in _SHAPES.items()]
)


def _length(dtype: int, slots: tuple[int, ...], given: int | None) -> int:
    if given is not None:
        return given
    dims = list(slots)
    while len(dims) > 1 and dims[-1] == 0:
        dims.pop()
    return math.prod(dims) * DTYPE_SIZE[dtype]


@pytest.mark.parametrize(
    ("fmt", "dtype", "slots", "length"),
    [pytest.param(f, d, s, ln, id=i) for i, f, d, s, ln in ROUNDTRIPS],
)
@rule("PROTO-SRV-ROUNDTRIP")
def test_roundtrip(
    server: ServerDriver, fmt: int, dtype: int, slots: tuple[int, int, int, int], length: int | None
) -> None:
    """PUT then GET returns the PUT's fmt, dtype, shape slots and exact bytes."""
    n = _length(dtype, slots, length)
    key, value = unique_key("rt"), payload(n)
    with Conn(server.address) as conn:
        conn.put(key, value, fmt, dtype, slots)
        got = conn.get(key)
    assert got.code == SUCCESS, f"GET after PUT replied {got.code}"
    assert got.length == n and got.data == value, f"value differs ({got.length} bytes)"
    same_dtype = {got.dtype, dtype} <= {1, 2} or got.dtype == dtype
    assert (got.fmt, got.slots) == (fmt, slots) and same_dtype, (
        f"reply fmt/dtype/slots {got.fmt}/{got.dtype}/{got.slots}, sent {fmt}/{dtype}/{slots}"
    )


@rule("PROTO-SRV-ROUNDTRIP")
def test_overwrite(server: ServerDriver) -> None:
    """A second PUT of a key replaces the value, also with another length and shape."""
    key, first, second = unique_key("ow"), payload(2048), payload(512)
    with Conn(server.address) as conn:
        conn.put(key, first, 1, 3, (2, 1, 16, 32))
        conn.put(key, second, 1, 3, (2, 1, 4, 32))
        got = conn.get(key)
    assert (got.code, got.data, got.slots) == (SUCCESS, second, (2, 1, 4, 32))


# -- missing keys, HEALTH, LIST -------------------------------------------------------------


@rule("PROTO-SRV-MISSING")
def test_get_missing(server: ServerDriver) -> None:
    """GET of a missing key: 400, length 0, no payload (the next reply follows at once)."""
    with Conn(server.address) as conn:
        conn.send(header(GET, key=unique_key("missing")) + header(HEALTH))
        missing, health = conn.reply(), conn.reply()
    assert (missing.code, missing.length) == (FAIL, 0), f"missing key: {missing}"
    assert health.code == SUCCESS, f"the reply after a miss is not HEALTH's: {health}"


@rule("PROTO-SRV-MISSING")
def test_exist(server: ServerDriver) -> None:
    key = unique_key("ex")
    with Conn(server.address) as conn:
        assert conn.exists(key) is False
        conn.put(key, payload(64), 1, 3, (2, 1, 1, 16))
        assert conn.exists(key) is True
        assert conn.get(key).code == SUCCESS  # EXIST changed nothing


@rule("PROTO-SRV-HEALTH")
def test_health(server: ServerDriver) -> None:
    with Conn(server.address) as conn:
        got = conn.health()
    assert (got.code, got.length) == (SUCCESS, 0), f"HEALTH replied {got}"


@rule("PROTO-SRV-LIST")
def test_list(server: ServerDriver) -> None:
    """LIST gets a reply: 200 with the keys, or 400; the connection stays usable."""
    key = unique_key("ls")
    with Conn(server.address) as conn:
        conn.put(key, payload(64), 1, 3, (2, 1, 1, 16))
        conn.send(header(LIST))
        try:
            got = conn.reply(with_payload=True)
        except TimeoutError:
            pytest.fail("LIST got no reply within 3 s (the server sends nothing for LIST)")
        assert got.code in (SUCCESS, FAIL), f"LIST replied {got}"
        if got.code == SUCCESS:
            assert key in got.data.decode("utf-8").split("\n"), "LIST misses a stored key"
        else:
            assert got.length == 0
        assert conn.health().code == SUCCESS, "connection unusable after LIST"


# -- framing and concurrency ----------------------------------------------------------------


@rule("PROTO-SRV-FRAMING")
def test_split_and_pipelined_requests(server: ServerDriver) -> None:
    """A PUT sent in small delayed pieces is stored whole; three requests sent in one write
    get three replies in order."""
    key, value = unique_key("split"), payload(4096)
    frame = header(PUT, len(value), 1, 3, 0, (2, 1, 16, 64), key) + value
    cuts = [0, 1, 7, 100, 185, 186, 187, 1000, 3000, len(frame)]
    with Conn(server.address) as conn:
        for a, b in itertools.pairwise(cuts):
            conn.send(frame[a:b])
            time.sleep(0.01)
        conn.send(header(EXIST, key=key) + header(GET, key=key) + header(HEALTH))
        exist, got, health = conn.reply(), conn.reply(with_payload=True), conn.reply()
    assert exist.code == SUCCESS and got.data == value and health.code == SUCCESS


@rule("PROTO-SRV-CONCURRENT")
def test_concurrent_clients(server: ServerDriver) -> None:
    """8 clients x 16 PUT/GET each, while one connection sits stalled mid-header."""
    errors: list[str] = []

    def worker(n: int) -> None:
        try:
            with Conn(server.address) as conn:
                for i in range(16):
                    size = 1024 + 4 * i
                    key, value = unique_key(f"c{n}"), payload(size, seed=n * 100 + i)
                    slots = (2, 1, 1, size // 4) if i % 2 == 0 else (size // 2, 0, 0, 0)
                    conn.put(key, value, 1, 3, slots)
                    got = conn.get(key)
                    if got.data != value:
                        errors.append(f"client {n} op {i}: value differs")
        except Exception as exc:  # reported below
            errors.append(f"client {n}: {exc!r}")

    with Conn(server.address) as stalled:
        stalled.send(header(HEALTH)[:50])
        threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
    assert not any(t.is_alive() for t in threads), "clients still running after 30 s"
    assert not errors, errors


@rule("PROTO-SRV-CONCURRENT")
def test_atomic_replace(server: ServerDriver) -> None:
    """GETs racing with PUTs of the same key see one whole value or the other."""
    key, a, b = unique_key("race"), b"A" * 65536, b"B" * 65536
    slots = (2, 1, 256, 64)
    stop = threading.Event()
    seen: set[bytes] = set()

    with Conn(server.address) as setup:
        setup.put(key, a, 1, 3, slots)
        assert setup.get(key).data == a

    def writer() -> None:
        with Conn(server.address) as conn:
            for i in range(200):
                if stop.is_set():
                    break
                conn.put(key, b if i % 2 == 0 else a, 1, 3, slots)
            conn.health()

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        with Conn(server.address) as reader:
            for _ in range(60):
                got = reader.get(key)
                assert got.code == SUCCESS, f"GET during replacement replied {got.code}"
                seen.add(got.data if got.data in (a, b) else b"torn")
    finally:
        stop.set()
        thread.join(10)
    assert b"torn" not in seen, "a GET returned a mix of two values"


# -- values cut short, lengths, capacity ---------------------------------------------------


def _partial_put(server: ServerDriver, key: str, total: int, sent: int) -> None:
    with Conn(server.address) as conn:
        conn.send(header(PUT, total, 4, 6, 0, (total, 0, 0, 0), key))
        conn.send(payload(sent))
    time.sleep(0.3)  # the server notices the close


@rule("PROTO-SRV-NO-PARTIAL")
def test_disconnect_mid_payload_stores_nothing(server: ServerDriver) -> None:
    key = unique_key("cut")
    _partial_put(server, key, 1000, 10)
    with Conn(server.address) as conn:
        assert not conn.exists(key), "EXIST says stored after a PUT of 1000 bytes cut after 10"
        conn.send(header(GET, key=key))
        got = conn.reply()
        assert got.code == FAIL, f"GET replied {got.code} announcing {got.length} bytes"
    canary(server)


@rule("PROTO-SRV-NO-PARTIAL")
def test_disconnect_mid_payload_keeps_old_value(server: ServerDriver) -> None:
    key, old = unique_key("keep"), payload(256)
    with Conn(server.address) as conn:
        conn.put(key, old, 4, 6, (256, 0, 0, 0))
        conn.health()
    _partial_put(server, key, 1000, 500)
    with Conn(server.address) as conn:
        conn.send(header(GET, key=key))
        got = conn.reply()
        assert (got.code, got.length) == (SUCCESS, len(old)), (
            f"after a PUT of 1000 bytes cut after 500 over a 256-byte value, GET replied "
            f"{got.code} announcing {got.length} bytes"
        )
        assert conn.recv_exact(got.length) == old, "the previous value came back altered"
    canary(server)


@rule("PROTO-SRV-NO-PARTIAL")
def test_value_invisible_until_complete(server: ServerDriver) -> None:
    key, value = unique_key("half"), payload(2048)
    with Conn(server.address) as writer, Conn(server.address) as reader:
        writer.send(header(PUT, len(value), 1, 3, 0, (2, 1, 16, 32), key) + value[:1000])
        time.sleep(0.1)
        assert reader.get(key).code == FAIL, "a half-received value is visible"
        writer.send(value[1000:])
        writer.health()
        got = reader.get(key)
    assert (got.code, got.data) == (SUCCESS, value)


@pytest.mark.parametrize(
    ("length", "slots"),
    [
        pytest.param(3, (2, 2, 0, 0), id="shorter"),
        pytest.param(64, (2, 2, 0, 0), id="longer"),
        pytest.param(8, (0, 0, 0, 0), id="zero-shape"),
    ],
)
@rule("PROTO-SRV-LENGTH-SHAPE")
def test_length_disagrees_with_shape(
    server: ServerDriver, length: int, slots: tuple[int, int, int, int]
) -> None:
    """KV_2LTD bfloat16: the shape says 8 bytes (or 0), the length says otherwise."""
    key = unique_key("len")
    with Conn(server.address) as conn:
        conn.send(header(PUT, length, 1, 3, 0, slots, key) + payload(length))
        with contextlib.suppress(ConnectionClosed, OSError):  # closing is one way to refuse
            conn.health()
    with Conn(server.address) as conn:
        assert not conn.exists(key), f"stored a {length}-byte value of shape {slots} bfloat16"
    canary(server)


@rule("PROTO-SRV-CAPACITY")
def test_capacity(server: ServerDriver) -> None:
    """PUT twice the stated capacity: what is stored stays within it, the newest value is
    there, and every value GET returns is whole."""
    if server.capacity_bytes is None:
        if server.name == "upstream-server":
            pytest.fail("the server stores without bound (a dict, no capacity option)")
        pytest.skip("the server states no capacity (only reference-server and upstream-server do)")
    cap = server.capacity_bytes
    size = cap // 8
    keys = [unique_key("cap") for _ in range(16)]
    values = [payload(size, seed=i) for i in range(16)]
    with Conn(server.address, timeout=10) as conn:
        for key, value in zip(keys, values, strict=True):
            conn.put(key, value, 4, 6, (size, 0, 0, 0))
            conn.health()
        stored = 0
        for key, value in zip(keys, values, strict=True):
            got = conn.get(key)
            if got.code == SUCCESS:
                assert got.data == value, "a value came back altered"
                stored += len(value)
        newest = conn.get(keys[-1])
    assert stored <= cap, f"{stored} payload bytes stored, capacity {cap}"
    assert newest.code == SUCCESS, "the newest value was not stored"


# -- headers a server cannot accept ---------------------------------------------------------


BAD_HEADERS = {
    "unknown-command": header(9, key=unique_key("bad")),
    "command-zero": header(0, key=unique_key("bad")),
    "unknown-fmt": header(PUT, 0, 99, 6, 0, (0, 0, 0, 0), unique_key("bad")),
    "unknown-dtype": header(PUT, 0, 4, 42, 0, (0, 0, 0, 0), unique_key("bad")),
    "unknown-location": header(PUT, 0, 4, 6, 7, (0, 0, 0, 0), unique_key("bad")),
    "negative-length": header(PUT, -5, 4, 6, 0, (0, 0, 0, 0), unique_key("bad")),
    "negative-dimension": header(PUT, 0, 1, 3, 0, (2, -1, 0, 0), unique_key("bad")),
    "key-not-parsable": header(PUT, 0, 4, 6, 0, (0, 0, 0, 0), b"garbage"),
    "key-not-utf8": header(PUT, 0, 4, 6, 0, (0, 0, 0, 0), b"m@1@0@ab@half@t%\xff\xfe"),
    "key-all-padding": header(HEALTH, key=b""),
    "get-with-length": header(GET, 8, key=unique_key("bad")) + b"x" * 8,
    "garbage": payload(186, seed=7),
}


@pytest.mark.parametrize("name", [pytest.param(n, id=n) for n in BAD_HEADERS])
@rule("PROTO-SRV-BAD-HEADER")
def test_bad_header(server: ServerDriver, name: str) -> None:
    """The server closes the connection, sends no SUCCESS, stores nothing, serves others."""
    frame = BAD_HEADERS[name]
    key_field = frame[36:186].rstrip(b" ")
    with Conn(server.address) as conn:
        conn.send(frame)
        conn.sock.settimeout(3)
        got = b""
        closed = False
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            try:
                piece = conn.sock.recv(4096)
            except TimeoutError:
                break
            except OSError:
                closed = True
                break
            if not piece:
                closed = True
                break
            got += piece
    if len(got) >= 4:
        code = int.from_bytes(got[:4], "little", signed=True)
        assert code != SUCCESS, f"the server answered {name} with SUCCESS"
    assert closed, f"the server kept the connection open after {name} (sent {len(got)} bytes)"
    if CLIENT_HEADER.unpack(frame[:186])[0] == PUT and b"@" in key_field:
        try:
            text = key_field.decode("utf-8")
        except UnicodeDecodeError:
            text = None
        if text is not None:
            with Conn(server.address) as conn:
                assert not conn.exists(text), f"{name}: a value was stored"
    canary(server)


@rule("PROTO-SRV-UNTRUSTED-LENGTH")
def test_huge_length(server: ServerDriver) -> None:
    """A PUT announcing 2**31 - 1 bytes and sending 1: no memory allocated by the claim."""
    before = server.memory_peaks()
    key = unique_key("huge")
    with Conn(server.address) as conn:
        with contextlib.suppress(OSError):  # refused at once
            conn.send(header(PUT, 2**31 - 1, 4, 6, 0, (2**31 - 1, 0, 0, 0), key) + b"x")
        time.sleep(0.5)
        after = server.memory_peaks()
    if before and after:
        grown = after.virtual - before.virtual
        assert grown < 256 << 20, (
            f"peak virtual memory grew by {grown >> 20} MiB on a 1-byte payload announcing "
            f"2 GiB (VmPeak before/after in bytes: {before.virtual}/{after.virtual})"
        )
    with Conn(server.address) as conn:
        assert not conn.exists(key)
    canary(server)


@rule("PROTO-SRV-ISOLATION")
def test_many_idle_and_partial_connections(server: ServerDriver) -> None:
    """64 idle connections and 16 stalled mid-header do not stop the server serving."""
    conns: list[Conn] = []
    try:
        for i in range(80):
            conn = Conn(server.address)
            conns.append(conn)
            if i >= 64:
                conn.send(header(GET, key=unique_key("idle"))[: 10 + i])
        canary(server)
    finally:
        for conn in conns:
            conn.close()
    canary(server)


@rule("PROTO-SRV-ISOLATION")
def test_truncated_header_then_close(server: ServerDriver) -> None:
    with Conn(server.address) as conn:
        conn.send(header(PUT, 100, 4, 6, 0, (100, 0, 0, 0), unique_key("trunc"))[:100])
    canary(server)


@rule("PROTO-SRV-IDLE")
def test_stalled_connection_is_closed(server: ServerDriver) -> None:
    """A connection stalled inside a request header is closed after the idle timeout."""
    timeout = server.idle_timeout if server.idle_timeout is not None else 5.0
    with Conn(server.address) as conn:
        conn.send(header(HEALTH)[:20])
        closed = conn.closed_by_peer(within=timeout + 2.0)
    assert closed, (
        f"a connection stalled mid-header is still open after {timeout + 2.0:.0f} s (the "
        "suite assumes a 5 s idle timeout where the server states none)"
    )
    canary(server)


# -- bounds a peer cannot stretch -----------------------------------------------------------


@rule("PROTO-SRV-BUDGET")
def test_payloads_in_flight_are_charged(server: ServerDriver) -> None:
    """Three PUTs each announce half the capacity and send a quarter of it: the server
    cannot hold all three, so it refuses (closes) at least one of the two late ones while
    they still send steadily; the first then completes and is stored whole."""
    if server.capacity_bytes is None:
        if server.name == "upstream-server":
            pytest.fail("the server stores without bound (a dict, no capacity option)")
        pytest.skip("the server states no capacity (only reference-server and upstream-server do)")
    half = server.capacity_bytes // 2
    keys = [unique_key("inflight") for _ in range(3)]
    values = [payload(half, seed=i) for i in range(3)]
    conns = [Conn(server.address, timeout=10) for _ in range(3)]
    try:
        for conn, key, value in zip(conns, keys, values, strict=True):
            with contextlib.suppress(OSError):
                conn.send(header(PUT, half, 4, 6, 0, (half, 0, 0, 0), key) + value[: half // 4])
        refused = [conn.closed_by_peer(within=0.5) for conn in conns[1:]]
        assert any(refused), (
            f"three PUTs of {half} bytes each are in flight on a server of capacity "
            f"{server.capacity_bytes}: none was refused"
        )
        conns[0].send(values[0][half // 4 :])
        got = conns[0].get(keys[0])
        assert (got.code, got.data == values[0]) == (SUCCESS, True), "the first PUT was lost"
    finally:
        for conn in conns:
            conn.close()
    canary(server)


@rule("PROTO-SRV-SLOTS")
def test_silent_connections_do_not_lock_out(server: ServerDriver) -> None:
    """More silent connections than the server has slots: a client that connects is
    still served (its connection reclaims a silent one's slot)."""
    limit = server.max_connections if server.max_connections is not None else 64
    silent = []
    try:
        for _ in range(limit + 8):
            silent.append(Conn(server.address))
        for _ in range(3):
            canary(server)
    finally:
        for conn in silent:
            conn.close()


@rule("PROTO-SRV-DEADLINES")
def test_header_deadline_is_a_total(server: ServerDriver) -> None:
    """A header sent one byte every 0.3 s never stalls, but is not complete within the
    idle timeout: the header deadline counts from its first byte, so the server closes it."""
    timeout = server.idle_timeout if server.idle_timeout is not None else 5.0
    frame = header(HEALTH)
    deadline = time.monotonic() + timeout + 3.0
    closed = False
    with Conn(server.address) as conn:
        for byte in itertools.islice(itertools.cycle(frame[:-1]), 1000):
            if time.monotonic() > deadline:
                break
            try:
                conn.send(bytes([byte]))
            except OSError:
                closed = True
                break
            if conn.closed_by_peer(within=0.3):
                closed = True
                break
    assert closed, f"a header trickling in for {timeout + 3.0:.0f} s is still open"
    canary(server)


@rule("PROTO-SRV-MEMORY")
def test_memory_within_the_stated_bound(server: ServerDriver) -> None:
    """Stalled PUTs each withholding their last byte, and GETs whose replies are never
    read: the server's peak resident memory stays within what it states."""
    if server.memory_bound is None or server.process is None or server.capacity_bytes is None:
        pytest.skip("the server states no memory bound (only reference-server does)")
    cap = server.capacity_bytes
    big, key = cap // 4, unique_key("mem")
    with Conn(server.address, timeout=10) as conn:
        conn.put(key, payload(big), 4, 6, (big, 0, 0, 0))
        conn.health()
    conns = []
    try:
        for i in range(8):
            conn = Conn(server.address, timeout=10)
            conns.append(conn)
            with contextlib.suppress(OSError):
                conn.send(header(PUT, cap // 2, 4, 6, 0, (cap // 2, 0, 0, 0), unique_key("m")))
                conn.send(payload(cap // 2 - 1, seed=i))
        for _ in range(8):
            conn = Conn(server.address, timeout=10)
            conns.append(conn)
            with contextlib.suppress(OSError):
                conn.send(header(GET, key=key) * 8)
        time.sleep(0.5)
        peaks = server.memory_peaks()
        assert peaks is not None, f"no memory peaks for server process {server.process.pid}"
        peak = peaks.resident
    finally:
        for conn in conns:
            conn.close()
    assert peak <= server.memory_bound, f"peak RSS {peak} above the stated {server.memory_bound}"
    canary(server)
