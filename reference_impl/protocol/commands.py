"""Client command ids and server return codes (SPEC tables "Client commands",
"Server return codes")."""

from __future__ import annotations

from enum import IntEnum

from .errors import UnencodableMessageError, UnknownIdError


class ClientCommand(IntEnum):
    """Field ``command`` of ClientMetaMessage (rule PROTO-COMMAND-ID)."""

    PUT = 1
    GET = 2
    EXIST = 3
    LIST = 4
    HEALTH = 5


class ServerReturnCode(IntEnum):
    """Field ``code`` of ServerMetaMessage (rule PROTO-CODE-ID)."""

    SUCCESS = 200
    FAIL = 400


def command_from_id(value: int) -> ClientCommand:
    """Read a command id; an id outside the table raises :class:`UnknownIdError`."""
    try:
        return ClientCommand(value)
    except ValueError:
        raise UnknownIdError(
            f"unknown client command id {value}", rule="PROTO-COMMAND-ID"
        ) from None


def return_code_from_id(value: int) -> ServerReturnCode:
    """Read a return code; a code outside the table raises :class:`UnknownIdError`."""
    try:
        return ServerReturnCode(value)
    except ValueError:
        raise UnknownIdError(f"unknown server return code {value}", rule="PROTO-CODE-ID") from None


def command_to_id(command: object) -> int:
    """The id a writer emits for ``command`` (a :class:`ClientCommand` or its int value)."""
    if isinstance(command, bool) or not isinstance(command, int):
        raise UnencodableMessageError(
            f"command must be a ClientCommand, got {command!r}", rule="PROTO-COMMAND-ID"
        )
    try:
        return int(ClientCommand(command))
    except ValueError:
        raise UnencodableMessageError(
            f"unknown client command {command!r}", rule="PROTO-COMMAND-ID"
        ) from None


def return_code_to_id(code: object) -> int:
    """The code a writer emits for ``code`` (a :class:`ServerReturnCode` or its int value)."""
    if isinstance(code, bool) or not isinstance(code, int):
        raise UnencodableMessageError(
            f"code must be a ServerReturnCode, got {code!r}", rule="PROTO-CODE-ID"
        )
    try:
        return int(ServerReturnCode(code))
    except ValueError:
        raise UnencodableMessageError(
            f"unknown server return code {code!r}", rule="PROTO-CODE-ID"
        ) from None
