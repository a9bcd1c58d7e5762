"""The testee operations and the capability flags (TESTEE.md, "Operations" and "hello").

An operation is something a driver can be asked to do. A capability flag is not an
operation: it declares that an operation honours an optional part of its request
(TESTEE.md, "hello"). An implementation declares both in one capability list.
"""

from __future__ import annotations

#: Every operation of the protocol; its name is also the capability that declares it.
OPERATIONS: tuple[str, ...] = (
    "codec.parse",
    "codec.decode",
    "codec.encode",
    "proto.client.write",
    "proto.client.read",
    "proto.server.write",
    "proto.server.read",
    "proto.remote.write",
    "proto.remote.read",
    "key.cache.write",
    "key.cache.read",
    "key.object.new",
    "key.kv_rank",
    "key.encoded.write",
    "key.encoded.read",
    "key.fs.write",
    "key.fs.read",
    "key.s3.write",
    "key.s3.read",
    "key.ipc",
    "key.window",
    "key.window.hit",
    "key.layout",
    # -- serde (TESTEE.md, "Serde operations"): one (K, V) group <-> one blob ----------------
    "serde.serialize",
    "serde.deserialize",
    "serde.estimate",
)

#: Flag -> the operation whose optional request fields it covers.
CAPABILITY_FLAGS: dict[str, str] = {
    "codec.hash_gate": "codec.parse",  # codec.parse honours expect_*
    "codec.dequant": "codec.decode",  # codec.decode honours out_v_dtype
    "codec.encode_scales": "codec.encode",  # codec.encode honours v_scales
}

#: Everything a hello may declare: operations, then flags.
CAPABILITIES: tuple[str, ...] = (*OPERATIONS, *CAPABILITY_FLAGS)
