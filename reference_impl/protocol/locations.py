"""Storage-location ids (SPEC table "Locations"), field ``location`` of both messages."""

from __future__ import annotations

from .errors import UnencodableMessageError, UnknownIdError

LOCATION_TO_INT: dict[str | None, int] = {
    None: 0,
    "LocalCPUBackend": 1,
    "LocalDiskBackend": 2,
}

INT_TO_LOCATION: dict[int, str | None] = {
    0: None,
    1: "LocalCPUBackend",
    2: "LocalDiskBackend",
}


def location_from_id(value: int) -> str | None:
    """Read a location id (rule PROTO-LOCATION-ID)."""
    try:
        return INT_TO_LOCATION[value]
    except KeyError:
        raise UnknownIdError(f"unknown location id {value}", rule="PROTO-LOCATION-ID") from None


def location_to_id(location: object) -> int:
    """The id a writer emits for a backend name; an unknown name is refused."""
    if location is not None and not isinstance(location, str):
        raise UnencodableMessageError(
            f"location must be a str or None, got {location!r}", rule="PROTO-LOCATION-ID"
        )
    try:
        return LOCATION_TO_INT[location]
    except KeyError:
        raise UnencodableMessageError(
            f"location {location!r} has no wire id", rule="PROTO-LOCATION-ID"
        ) from None
