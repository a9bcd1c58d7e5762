"""A client under test, driven against the suite's scripted server (SPEC "The protocol on a
connection", PROTO-CLI-*): replies split into small delayed pieces, cut short, or with
fields a client must refuse. Every call is bounded by client_driver.CALL_TIMEOUT and every
scripted server by scripted_server.LIFETIME."""

from __future__ import annotations

import pytest
import torch

from ..drivers.client_driver import ClientDriver, ClientHung, ClientRefused
from .scripted_server import ScriptedServer, Step, reply_header
from .wire_client import payload

rule = pytest.mark.rule
KEY = "lmckv-client@1@0@abc@half"
SLOTS = (2, 1, 16, 64)  # bfloat16: 4096 bytes
VALUE = payload(4096, seed=42)
OK = reply_header(200, 4096, 1, 3, SLOTS)
EMPTY_OK = reply_header(200, 0)
MISS = reply_header(400, 0)
#: Seconds a client has to close its connection after refusing a reply.
CLOSE_WAIT = 2.0

SPLITS = {
    "one-piece": Step(OK + VALUE),
    "header-byte-by-byte": Step(OK + VALUE, cuts=range(1, 37), delay=0.002),
    "header-cut-at-20": Step(OK + VALUE, cuts=[20], delay=0.05),
    "header-with-payload-start": Step(OK + VALUE, cuts=[100, 2000], delay=0.05),
    "payload-in-10-pieces": Step(OK + VALUE, cuts=range(36, 4132, 410), delay=0.01),
}


def _get(
    client: ClientDriver, steps: list[Step], wait_close: bool = False
) -> tuple[bytes | Exception | None, bool]:
    """GET KEY against a server playing ``steps``: (value, None or the exception raised;
    with ``wait_close``, whether the client closed its connection within CLOSE_WAIT)."""
    with ScriptedServer(list(steps)) as server:
        session = client.connect(*server.address)
        try:
            try:
                result: bytes | Exception | None = session.get(KEY)
            except (ClientRefused, ClientHung) as exc:
                result = exc
            closed = server.client_closed.wait(CLOSE_WAIT) if wait_close else False
        finally:
            session.close()
    return result, closed


@pytest.mark.parametrize("split", [pytest.param(n, id=n) for n in SPLITS])
@rule("PROTO-CLI-WHOLE-FRAMES")
def test_get_reads_whole_frames(client: ClientDriver, split: str) -> None:
    result, _ = _get(client, [SPLITS[split]])
    assert not isinstance(result, Exception), f"GET failed on a valid reply split {split}: {result}"
    assert result == VALUE, f"GET returned {None if result is None else len(result)} other bytes"


@rule("PROTO-CLI-WHOLE-FRAMES")
def test_exists_reads_whole_header(client: ClientDriver) -> None:
    with ScriptedServer([Step(EMPTY_OK, cuts=[10], delay=0.05)]) as server:
        session = client.connect(*server.address)
        try:
            assert session.exists(KEY) is True
        except (ClientRefused, ClientHung) as exc:
            pytest.fail(f"EXIST failed on a valid 200 reply cut at byte 10: {exc}")
        finally:
            session.close()


@rule("PROTO-CLI-MISSING")
def test_missing_then_reuse(client: ClientDriver) -> None:
    """400 to GET is no value, 400 to EXIST is False; the connection stays usable."""
    with ScriptedServer([Step(MISS), Step(MISS), Step(OK + VALUE)]) as server:
        session = client.connect(*server.address)
        try:
            assert session.get(KEY) is None
            assert session.exists(KEY) is False
            assert session.get(KEY) == VALUE
        finally:
            session.close()


EARLY_CLOSES = {
    "before-reply": Step(b"", close=True),
    "inside-header": Step(OK[:20], close=True),
    "inside-payload": Step(OK + VALUE[:1000], close=True),
}


@pytest.mark.parametrize("case", [pytest.param(n, id=n) for n in EARLY_CLOSES])
@rule("PROTO-CLI-EARLY-CLOSE")
def test_early_close(client: ClientDriver, case: str) -> None:
    result, _ = _get(client, [EARLY_CLOSES[case]])
    assert not isinstance(result, ClientHung), f"the client did not notice the close: {result}"
    assert not isinstance(result, bytes), (
        f"GET returned {len(result)} bytes from a reply cut short ({case})"
    )


BAD_REPLIES = {
    "negative-length": Step(reply_header(200, -8, 1, 3, SLOTS)),
    "length-shorter-than-shape": Step(reply_header(200, 64, 1, 3, SLOTS) + VALUE[:64]),
    "length-longer-than-shape": Step(reply_header(200, 8192, 1, 3, SLOTS) + VALUE + VALUE),
    "unknown-code": Step(reply_header(201, 0)),
    "unknown-dtype": Step(reply_header(200, 4096, 1, 42, SLOTS) + VALUE),
    "unknown-fmt": Step(reply_header(200, 4096, 99, 3, SLOTS) + VALUE),
    "negative-dimension": Step(reply_header(200, 4096, 1, 3, (2, 1, -16, -64)) + VALUE),
}


@pytest.mark.parametrize("case", [pytest.param(n, id=n) for n in BAD_REPLIES])
@rule("PROTO-CLI-REPLY-CHECK")
def test_bad_reply_refused(client: ClientDriver, case: str) -> None:
    """No value from the reply, and the connection (whose framing is lost) closed."""
    result, closed = _get(client, [BAD_REPLIES[case]], wait_close=True)
    assert not isinstance(result, ClientHung), f"the client hung on the reply: {result}"
    assert not isinstance(result, bytes), (
        f"GET returned a value ({len(result)} bytes) from the reply {case}"
    )
    assert closed, f"the client refused the reply {case} but kept the connection open"


@rule("PROTO-CLI-WHOLE-FRAMES")
def test_put_frame(client: ClientDriver) -> None:
    """A PUT is one 186-byte header announcing the payload, then exactly the payload."""
    with ScriptedServer([Step(EMPTY_OK)]) as server:
        session = client.connect(*server.address)
        try:
            session.put(KEY, VALUE, torch.bfloat16, SLOTS)
            assert session.exists(KEY) is True  # the PUT was read whole before this
        finally:
            session.close()
    assert server.payloads == [VALUE]
    assert int.from_bytes(server.requests[0][4:8], "little") == len(VALUE)
