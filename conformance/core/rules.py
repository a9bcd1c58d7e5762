"""The rule registry: every conformance test checks exactly one of these rules.

A rule has an id (``KV-CRC``), a level (MUST or SHOULD, RFC 2119), the anchor of the
paragraph in ``reference_impl/SPEC.md`` that states it, and a one-line summary. The
anchor is the rule id in lower case; SPEC.md states each rule under that anchor, as
``<a id="kv-crc"></a>**KV-CRC** (MUST)``.

SPEC.md is the source of truth for which rules exist and their levels; this registry is a
hand-kept index of it, checked in both directions by ``tests/test_suite_rules.py`` (every
rule anchor of SPEC.md is registered with its level, every registered rule has its anchor).
The registry is not parsed from SPEC.md at import time because the summaries here are
one-line digests written for test reports, not text that can be cut out of SPEC.md's
paragraphs (which run on with tables, grammars and examples), and because the plugin
imports this module for every conformance run: a Markdown parse failure would break the
whole suite, and SPEC.md would have to ship as package data, whereas a stale entry here
fails one named test.
"""

from __future__ import annotations

from dataclasses import dataclass

MUST = "MUST"
SHOULD = "SHOULD"


@dataclass(frozen=True)
class Rule:
    """One normative statement of SPEC.md."""

    id: str
    level: str
    summary: str

    @property
    def spec_anchor(self) -> str:
        return "#" + self.id.lower()


_RULES: tuple[Rule, ...] = (
    # -- encoded-KV blob: header ----------------------------------------------------------
    Rule(
        "KV-MAGIC",
        MUST,
        "A blob starts with the 8 bytes 'LMCKV' 01 00 01; readers reject "
        "any other prefix with CorruptEncodedKVError.",
    ),
    Rule(
        "KV-VERSION",
        MUST,
        "The u16 at offset 8 is a version the reader reads (1; a v2 reader also 2); readers "
        "reject any other version, and a v1 reader rejects every v2 blob.",
    ),
    Rule(
        "KV-LAYOUT",
        MUST,
        "Header fields have the fixed order, widths and offsets of "
        "SPEC.md, all integers little-endian; a writer produces exactly these bytes.",
    ),
    Rule("KV-SCOPE", MUST, "scale_scope (u16 at offset 10) is 0..3; readers reject other ids."),
    Rule(
        "KV-K-DTYPE",
        MUST,
        "k_dtype is float16 (id 2, legacy id 1) or bfloat16 (id 3); readers reject other ids.",
    ),
    Rule(
        "KV-V-DTYPE",
        MUST,
        "v_dtype is float8_e4m3fn (id 7); readers reject any other id, e5m2 (8) included.",
    ),
    Rule(
        "KV-SCALE-DTYPE",
        MUST,
        "scale_dtype is float32, float16, bfloat16 or float64; readers reject other ids.",
    ),
    Rule("KV-DTYPE-ALIAS", MUST, "Dtype id 1 reads as float16; writers always write 2."),
    Rule(
        "KV-RESERVED",
        MUST,
        "The reserved u16 at offset 18 is written 0; readers reject a non-zero value.",
    ),
    Rule(
        "KV-IDS",
        MUST,
        "layer_id and chunk_id are int64, -1 meaning unset; values below -1 "
        "are rejected; every other value round-trips exactly.",
    ),
    Rule(
        "KV-GEOMETRY",
        MUST,
        "chunk_size, page_size, kv_head_count and head_dim are -1 "
        "(unset) or positive; 0 and values below -1 are rejected.",
    ),
    Rule(
        "KV-SCALE-SHAPE-N",
        MUST,
        "scale_shape_n is 0..8; readers reject other values "
        "before reading or allocating anything sized by it.",
    ),
    Rule(
        "KV-SCALE-SHAPE",
        MUST,
        "scale_shape is () for PER_TENSOR, (H,) for PER_LAYER_HEAD, "
        "(n_pages, H) for PER_PAGE_HEAD, consistent with kv_head_count, head_dim, "
        "page_size and the payload; readers reject a disagreement.",
    ),
    Rule(
        "KV-LEN",
        MUST,
        "Payload lengths are non-negative and agree with the dtypes and "
        "shapes: whole K elements, as many K elements as V elements or none, scale bytes = "
        "prod(scale_shape) x scale itemsize; readers reject a disagreement even when the "
        "CRC is valid.",
    ),
    Rule(
        "KV-K-ABSENT",
        MUST,
        "A K-less blob (k_payload_len 0, V present, k_dtype recorded and checked) is valid: "
        "V is checked against its scales and geometry, decode returns V and an empty K; a "
        "blob with K but no V is rejected.",
    ),
    Rule(
        "KV-LEN-SUM",
        MUST,
        "The payload is exactly k_payload_len + v_payload_len + "
        "scale_payload_len bytes after the header; a shorter buffer is rejected.",
    ),
    Rule(
        "KV-HASHES",
        MUST,
        "The hash section is a u16 count then (u16 length, UTF-8) key "
        "and value strings; writers emit the six known keys in order; readers reject "
        "non-UTF-8, overlong or duplicate strings and ignore unknown keys.",
    ),
    Rule(
        "KV-HASH-GATE",
        MUST,
        "Reading with expected hashes raises CodecMismatchError when "
        "an expected and a stored value are both non-empty and differ; empty strings "
        "match anything.",
    ),
    Rule(
        "KV-CRC",
        MUST,
        "The u32 after the hash section is the zlib CRC-32 (IEEE 802.3, "
        "not CRC-32C) of the payload only, little-endian; a mismatch is rejected.",
    ),
    Rule(
        "KV-TRUNCATED",
        MUST,
        "A buffer that ends inside any header field is rejected with "
        "CorruptEncodedKVError (never a crash or an unchecked read).",
    ),
    Rule(
        "KV-TRAILING",
        MUST,
        "Bytes after the payload are rejected by default and ignored "
        "when the reader is asked to allow them (allow_trailing).",
    ),
    Rule(
        "KV-PAYLOAD",
        MUST,
        "The payload is K, then V (FP8), then scales, each the C-order "
        "bytes of its tensor; decode returns exactly these bytes.",
    ),
    Rule(
        "KV-LOGICAL-SHAPE",
        MUST,
        "decode returns K and V in their logical shape, rebuilt "
        "from kv_head_count, head_dim, page_size, the PER_PAGE_HEAD scale shape and "
        "kv_layout (NHD: [pages, page_size, H, D]; HND: [pages, H, page_size, D]).",
    ),
    Rule(
        "KV-LAYOUT-NAME",
        MUST,
        "kv_layout '' or 'NHD' is token-major and 'HND' head-major; "
        "decode without an explicit shape refuses other names with "
        "UnsupportedConfigError.",
    ),
    Rule(
        "KV-ENCODE-REFUSE",
        MUST,
        "encode refuses (UnsupportedConfigError) to write a blob that readers would reject.",
    ),
    # -- encoded-KV blob v2 (SPEC.md, "Encoded-KV v2 (draft)") ----------------------------
    Rule(
        "KV2-SCHEME",
        MUST,
        "In a v2 header the u16 at offset 18 is scale_scheme RAW_UNIT (1); v2 readers reject "
        "any other scheme, COMPUTED_PER_TENSOR (0) included. Writers write v2 for RAW_UNIT only.",
    ),
    Rule(
        "KV2-SCOPE",
        MUST,
        "A v2 (RAW_UNIT) blob's scale_scope is NONE (4); NONE appears in v2 blobs only.",
    ),
    Rule(
        "KV2-NO-SCALES",
        MUST,
        "Scope NONE stores no scales: scale_shape_n 0 and scale_payload_len 0.",
    ),
    Rule(
        "KV2-CRC",
        MUST,
        "A v2 blob's CRC is the CRC-32 (IEEE) of every header byte before the CRC field, then "
        "the payload; a header or payload bit flip is rejected.",
    ),
    Rule(
        "KV2-RAW-BYTES",
        MUST,
        "A RAW_UNIT blob's K bytes and V codes decode as stored, bit for bit, with no scale; "
        "widening V is refused (UnsupportedConfigError).",
    ),
    # -- the serde layer (SPEC.md, "The serde layer") -------------------------------------
    Rule(
        "SERDE-BYTES",
        MUST,
        "serialize writes the codec's blob of the same inputs (V-only: without K's section) "
        "at the start of the destination, returns its length and writes nothing after it; "
        "inputs the codec refuses are refused, typed, with nothing written.",
    ),
    Rule(
        "SERDE-ESTIMATE",
        MUST,
        "estimate_serialized_size is never below what serialize writes, for every layout "
        "group the serializer accepts.",
    ),
    Rule(
        "SERDE-ESTIMATE-SCOPE",
        SHOULD,
        "estimate_serialized_size sizes every scope serialize accepts.",
    ),
    Rule(
        "SERDE-DST-SMALL",
        MUST,
        "A destination smaller than the blob is a typed refusal; nothing is written into it.",
    ),
    Rule(
        "SERDE-SLOTS",
        MUST,
        "Required slots (K and V; V-only: V, and K None) are checked with a typed refusal; "
        "a None output slot is skipped, (None, None) is a no-op.",
    ),
    Rule(
        "SERDE-UNTOUCHED",
        MUST,
        "An output slot nobody asked to fill (V-only: K) is never written, and a refused "
        "deserialize has written no slot.",
    ),
    Rule(
        "SERDE-CROSS-MODE",
        MUST,
        "The (K, V) reader refuses K of a K-less blob but reads its V; the V-only reader "
        "refuses a blob with K; typed, nothing written.",
    ),
    Rule(
        "SERDE-READ",
        MUST,
        "deserialize of serialize's output fills K bit-exact and V per Q-DEQUANT in the "
        "slot's dtype, in every scope the serializer writes.",
    ),
    Rule(
        "SERDE-FRAMED",
        MUST,
        "A deserializer reads the blob at the start of a capacity-sized source and ignores "
        "the unused capacity after it; a corrupt blob is CorruptEncodedKVError.",
    ),
    # -- quantization -----------------------------------------------------------------------
    Rule(
        "Q-SCALE",
        MUST,
        "scale = float32(amax |V| over the scope's group) / 448; a group "
        "with amax 0 (or NaN) gets 1.0; PER_PAGE_HEAD scales are stored (n_pages, H) "
        "whatever the axis order of V.",
    ),
    Rule(
        "Q-ROUND",
        MUST,
        "q = e4m3fn(clamp(float32(V) / scale, -448, 448)) with "
        "round-to-nearest-even, subnormals included; out-of-range values saturate.",
    ),
    Rule(
        "Q-DEQUANT",
        MUST,
        "V' = out_dtype(float32(q) * float32(scale)) with the scale of q's group, in every scope.",
    ),
    Rule(
        "Q-EXTERNAL",
        MUST,
        "EXTERNAL scope: the caller's scales are stored as given and "
        "broadcast against V when quantizing and dequantizing.",
    ),
    Rule(
        "Q-NONFINITE",
        SHOULD,
        "NaN and Inf in V follow Q-SCALE/Q-ROUND literally (NaN-"
        "propagating amax, NaN group -> scale 1.0, Inf amax -> scale Inf), so every "
        "implementation writes the same bytes.",
    ),
    # -- protocol messages (ids shared with the protocol/keys draft of SPEC.md) -----------
    Rule(
        "PROTO-TYPED-ERRORS",
        MUST,
        "Readers and writers of messages and keys report every "
        "malformed input as an error of the format's family (ProtocolError, KeyFormatError), "
        "never a raw unpacking, lookup, decoding or assertion error.",
    ),
    Rule(
        "PROTO-BYTE-ORDER",
        MUST,
        "Every message integer is an int32 stored little-endian, without padding.",
    ),
    Rule("PROTO-INT32", MUST, "Writers refuse values outside int32 (and non-integers)."),
    Rule(
        "PROTO-LENGTH-NONNEG",
        MUST,
        "The length field is >= 0; writers refuse and readers reject a negative length.",
    ),
    Rule(
        "PROTO-COMMAND-ID",
        MUST,
        "command is 1..5 (PUT, GET, EXIST, LIST, HEALTH); readers reject other ids.",
    ),
    Rule("PROTO-CODE-ID", MUST, "code is 200 (SUCCESS) or 400 (FAIL); readers reject others."),
    Rule("PROTO-FMT-ID", MUST, "fmt is a MemoryFormat id 0..8; readers reject others."),
    Rule(
        "PROTO-DTYPE-ID",
        MUST,
        "dtype is an id of the dtype table (1 read as float16, "
        "written as 2); writers refuse dtypes without an id, readers reject unknown ids.",
    ),
    Rule(
        "PROTO-LOCATION-ID",
        MUST,
        "location is 0 (none), 1 (LocalCPUBackend) or 2 "
        "(LocalDiskBackend); writers refuse other names, readers other ids.",
    ),
    Rule("PROTO-SHAPE-RANK", MUST, "A shape has at most 4 dimensions; writers refuse more."),
    Rule(
        "PROTO-SHAPE-DIMS",
        MUST,
        "Each dimension is in [0, 2^31-1]; negative dimensions are refused and rejected.",
    ),
    Rule(
        "PROTO-SHAPE-PAD",
        MUST,
        "Shapes are padded to 4 slots with zeros; readers drop "
        "trailing zero slots (keeping one) except for BINARY/BINARY_BUFFER, so [4, 0] reads "
        "back as [4] (documented loss).",
    ),
    Rule(
        "PROTO-CLIENT-LAYOUT",
        MUST,
        "ClientMetaMessage is 9 int32 (command, length, fmt, "
        "dtype, location, 4 shape slots) then the 150-byte key field: 186 bytes.",
    ),
    Rule(
        "PROTO-SERVER-LAYOUT",
        MUST,
        "ServerMetaMessage is 9 int32 (code, length, fmt, dtype, "
        "4 shape slots, location): 36 bytes.",
    ),
    Rule(
        "PROTO-EXACT-LENGTH",
        MUST,
        "Readers reject a ClientMetaMessage that is not exactly "
        "186 bytes and a ServerMetaMessage that is not exactly 36 bytes.",
    ),
    Rule(
        "PROTO-KEY-LENGTH",
        MUST,
        "The key string is at most 150 UTF-8 bytes (bytes, not "
        "characters); writers refuse longer keys instead of truncating them.",
    ),
    Rule(
        "PROTO-KEY-FIELD",
        MUST,
        "The key field is the UTF-8 key padded with 0x20; readers "
        "strip trailing 0x20 only and reject all-padding, NUL and invalid UTF-8; writers "
        "refuse keys ending in a space.",
    ),
    Rule(
        "PROTO-RMETA-LAYOUT",
        MUST,
        "RemoteMetadata is length, fmt, then per group dtype and "
        "4 shape slots, all int32: 8 + 20 n bytes.",
    ),
    Rule(
        "PROTO-RMETA-GROUPS",
        MUST,
        "n >= 1 comes from configuration; readers read the first "
        "8 + 20 n bytes and reject shorter buffers; writers refuse a different group count.",
    ),
    Rule(
        "PROTO-RMETA-DTYPE",
        MUST,
        "Every RemoteMetadata group of a tensor format has a real dtype (id 0 refused and "
        "rejected); a byte object (UNDEFINED, BINARY, BINARY_BUFFER) may have none.",
    ),
    # -- keys -------------------------------------------------------------------------------
    Rule(
        "KEY-CACHE-FORM",
        MUST,
        "CacheEngineKey string: model@world_size@worker_id@hash@dtype"
        "[@layer][@tag%value...]; readers reject other shapes.",
    ),
    Rule("KEY-CACHE-MODEL", MUST, "The model name holds no '@'; writers refuse one that does."),
    Rule(
        "KEY-CACHE-INT",
        MUST,
        "world_size, worker_id and layer are canonical ASCII decimal "
        "fitting int64; '+1', ' 1', '1_0', non-ASCII digits and spaces are rejected.",
    ),
    Rule(
        "KEY-CACHE-HASH",
        MUST,
        "The chunk hash is lowercase hex without prefix (negative "
        "with '-'); uppercase, '0x' and empty are rejected.",
    ),
    Rule(
        "KEY-CACHE-DTYPE",
        MUST,
        "The dtype field is a name of the key dtype table (half, "
        "bfloat16, float, ...), not a torch name.",
    ),
    Rule(
        "KEY-CACHE-LAYER",
        MUST,
        "A sixth field without '%' is a canonical layer id >= 0; "
        "writers refuse a negative layer id.",
    ),
    Rule(
        "KEY-CACHE-TAG",
        MUST,
        "Tags are name%value; names hold no '@' or '%', values no "
        "'@'; a tag without '%' or a repeated name is rejected.",
    ),
    Rule("KEY-HASH-BYTES", MUST, "ObjectKey.chunk_hash is a byte string, possibly empty."),
    Rule("KEY-MODEL-CHARS", MUST, "ObjectKey.model_name holds neither '@' nor NUL."),
    Rule("KEY-SALT-CHARS", MUST, "cache_salt holds none of '@', '/', '\\', NUL."),
    Rule(
        "KEY-SALT-LENGTH",
        MUST,
        "cache_salt is at most 128 characters (Unicode code points, not UTF-8 bytes).",
    ),
    Rule(
        "KEY-TEXT-UNICODE",
        MUST,
        "model_name and cache_salt are Unicode text (no lone surrogates), UTF-8 in every "
        "form; ObjectKey refuses other text and readers reject names whose bytes are not UTF-8.",
    ),
    Rule("KEY-GROUP-RANGE", MUST, "object_group_id is an integer in 0..2^63-1."),
    Rule("KEY-KVRANK-WIDTH", MUST, "kv_rank is an integer in 0..2^32-1."),
    Rule(
        "KEY-KVRANK-PACK",
        MUST,
        "kv_rank = world_size<<24 | global_rank<<16 | local_world_size<<8 | local_rank.",
    ),
    Rule(
        "KEY-KVRANK-RANGE",
        MUST,
        "Each kv_rank input is in 0..255; anything else is refused, "
        "so no two inputs pack to the same rank.",
    ),
    Rule(
        "KEY-STRING-FORM",
        MUST,
        "S3/native object name: model@%08x rank@%x group@hex hash"
        "[@salt], salt present iff non-empty.",
    ),
    Rule(
        "KEY-SALT-FIELD",
        MUST,
        "Readers reject an empty fifth (salt) field and field counts other than 4 or 5.",
    ),
    Rule(
        "KEY-HEX-CANONICAL",
        MUST,
        "Object-key readers accept only canonical lowercase hex of "
        "exact width: no prefix, sign, space, underscore or odd-length hash.",
    ),
    Rule(
        "KEY-FS-FORM",
        MUST,
        "FS filename: model with '/' -> '-SEP-', '@0x%08x' rank, '@%x' "
        "group, '@hex' hash, optional '@salt', '.data'; readers require each part.",
    ),
    Rule(
        "KEY-FS-SEP-ALIAS",
        MUST,
        "Writers refuse model names that do not survive the "
        "'/' <-> '-SEP-' escape, so two keys never share a filename.",
    ),
    Rule("KEY-FS-NAME-MAX", SHOULD, "Writers refuse filenames longer than 255 bytes."),
    Rule(
        "KEY-ENCODED-FIELDS",
        MUST,
        "EncodedObjectKey JSON: chunk_hash_hex, model_name, "
        "kv_rank, optional object_group_id (0) and cache_salt (''); unknown members, missing "
        "required ones and wrong JSON types are rejected.",
    ),
    Rule(
        "KEY-IPC-FANOUT",
        MUST,
        "IPC fan-out: one list per object group in order, chunk-major "
        "rank-minor; without worker_id all ranks pack(ws, w, ws, w), else only the worker's.",
    ),
    Rule(
        "KEY-IPC-WORKER",
        MUST,
        "IPC world_size is 1..255 and worker_id, when present, 0..world_size-1.",
    ),
    Rule(
        "KEY-WINDOW-VALUES",
        MUST,
        "Each attention window is -1 (full attention) or >= 1 chunks; 0, values below -1 "
        "and a group index outside 0..groups-1 are refused.",
    ),
    Rule(
        "KEY-WINDOW-HIT",
        MUST,
        "A group serves a hit for an N-chunk prefix when it holds chunks 0..N-1 (full "
        "attention) or the last min(w, N) chunks N-min(w, N)..N-1 (window w).",
    ),
    Rule(
        "KEY-LAYOUT-LENGTHS",
        MUST,
        "A memory layout descriptor has as many dtypes as shapes; others are refused.",
    ),
    # -- the protocol on a connection: servers -------------------------------------------
    Rule(
        "PROTO-SRV-FRAMING",
        MUST,
        "A server reads 186-byte headers and exactly length PUT payload bytes however split, "
        "answers GET/EXIST/LIST/HEALTH once each in order, and nothing for PUT.",
    ),
    Rule(
        "PROTO-SRV-ROUNDTRIP",
        MUST,
        "GET after a complete PUT replies 200 with the PUT's fmt, dtype, shape slots and "
        "exact bytes; a later PUT of the key replaces the value.",
    ),
    Rule(
        "PROTO-SRV-MISSING",
        MUST,
        "GET of a missing key replies 400 with length 0 and no payload; EXIST replies 200 "
        "or 400 with length 0.",
    ),
    Rule("PROTO-SRV-HEALTH", MUST, "HEALTH replies 200 with length 0."),
    Rule(
        "PROTO-SRV-LIST",
        MUST,
        "LIST gets a reply: 200 with the stored keys separated by newlines, or 400 with "
        "length 0; the connection stays usable.",
    ),
    Rule(
        "PROTO-SRV-NO-PARTIAL",
        MUST,
        "A PUT's value is visible only once all length bytes arrived; a PUT cut short "
        "leaves the key's previous value (or its absence).",
    ),
    Rule(
        "PROTO-SRV-LENGTH-SHAPE",
        MUST,
        "A tensor-format PUT whose length differs from shape x dtype size (or has no dtype) "
        "is not stored.",
    ),
    Rule(
        "PROTO-SRV-CONCURRENT",
        MUST,
        "Connections are served independently; a value is replaced atomically (old or "
        "new, whole, never a mix).",
    ),
    Rule(
        "PROTO-SRV-CAPACITY",
        MUST,
        "A server bounds the bytes it stores by a capacity and applies a stated rule "
        "there (the reference: LRU eviction; a value above the capacity is refused).",
    ),
    Rule(
        "PROTO-SRV-BAD-HEADER",
        MUST,
        "A header that breaks the ClientMetaMessage reader rules, or a non-PUT with a "
        "non-zero length, closes that connection without storing or succeeding.",
    ),
    Rule(
        "PROTO-SRV-UNTRUSTED-LENGTH",
        MUST,
        "A server never allocates by a length field before the bytes arrive, and refuses "
        "a length above its largest value at once.",
    ),
    Rule(
        "PROTO-SRV-ISOLATION",
        MUST,
        "Nothing one connection sends affects what other connections read or store.",
    ),
    Rule(
        "PROTO-SRV-IDLE",
        SHOULD,
        "A server bounds its open connections and closes connections stalled mid-frame "
        "past an idle timeout.",
    ),
    Rule(
        "PROTO-SRV-BUDGET",
        MUST,
        "The capacity bounds stored values, payloads in flight (charged when announced) and "
        "replies being sent; a PUT that cannot fit is refused.",
    ),
    Rule(
        "PROTO-SRV-SLOTS",
        SHOULD,
        "A connection slot held by a connection that sends nothing is reclaimed for a new "
        "connection when every slot is taken.",
    ),
    Rule(
        "PROTO-SRV-DEADLINES",
        SHOULD,
        "Every wait on a peer has a deadline: first request byte, header completion, "
        "payload progress, reply progress.",
    ),
    Rule(
        "PROTO-SRV-MEMORY",
        SHOULD,
        "A server states what it holds beyond its capacity (a base plus a bound per "
        "connection) and holds no more whatever its peers send.",
    ),
    # -- the protocol on a connection: clients -------------------------------------------
    Rule(
        "PROTO-CLI-WHOLE-FRAMES",
        MUST,
        "A client reads whole reply frames through short and delayed reads; it never "
        "parses a partial header.",
    ),
    Rule(
        "PROTO-CLI-EARLY-CLOSE",
        MUST,
        "A connection that ends before a whole reply frame is an error for that request, "
        "never a partial value.",
    ),
    Rule(
        "PROTO-CLI-MISSING",
        MUST,
        "A 400 reply reads as no value (GET) or not stored (EXIST); the connection stays usable.",
    ),
    Rule(
        "PROTO-CLI-REPLY-CHECK",
        MUST,
        "A client validates reply headers and a GET length against shape x dtype and its "
        "own limit, refusing (and closing) instead of returning a value.",
    ),
    # -- a store ------------------------------------------------------------------------
    Rule(
        "STORE-NAME",
        MUST,
        "An object's name reads back, under its adapter's form, to an ObjectKey whose name "
        "is that same string.",
    ),
    Rule(
        "STORE-FOREIGN",
        MUST,
        "A store holds only objects named as the adapter names them, the adapter's own "
        "files, its unfinished writes and directories.",
    ),
    Rule("STORE-EMPTY", MUST, "An object is not empty."),
    Rule(
        "STORE-SIZE",
        MUST,
        "A raw, fp8 or aesgcm object holds the content bytes of its group's full chunk, or a "
        "whole number of its tokens below that (a partial last chunk).",
    ),
    Rule(
        "STORE-AESGCM-FRAME",
        MUST,
        "An aesgcm object is a version-1 frame: 0x01, a 12-byte IV, the ciphertext, a 16-byte tag.",
    ),
    Rule(
        "STORE-AESGCM-TAG",
        MUST,
        "An aesgcm object's tag verifies under the key LMCache derives for its cache_salt.",
    ),
    Rule(
        "STORE-CHECKSUM-FRAME",
        MUST,
        "A checksum object is a version-1 frame: 0x01, an 8-byte fingerprint, an 8-byte "
        "xxh3_64 hash, the payload.",
    ),
    Rule(
        "STORE-CHECKSUM-FINGERPRINT",
        MUST,
        "A checksum object's fingerprint is the first 8 bytes of its key's chunk hash "
        "(zero-padded).",
    ),
    Rule(
        "STORE-CHECKSUM-HASH",
        MUST,
        "A checksum object's hash is xxh3_64 of every byte after its 17-byte header.",
    ),
    Rule(
        "STORE-TQ01-FRAME",
        MUST,
        "A tqai object is one TQ01 frame whose blocks have the lengths its header gives and "
        "end where the object ends.",
    ),
    Rule(
        "STORE-BLOB-TRUNCATED",
        MUST,
        "An LMCKV object holds its whole header and every payload byte the header declares.",
    ),
    Rule(
        "STORE-BLOB-VALID",
        MUST,
        "An LMCKV object is one valid blob by every reader rule, strictly (no trailing bytes).",
    ),
    Rule(
        "STORE-NAME-BLOB",
        MUST,
        "A blob's recorded model_id, when set, is the model_name of the key it is named after.",
    ),
    Rule(
        "STORE-TEMP",
        SHOULD,
        "An unfinished write (a .tmp file, a file of relative_tmp_dir) does not outlive its "
        "writer.",
    ),
    Rule("STORE-READ", MUST, "Every listed object that is still there can be read."),
    # -- reading a damaged store through an adapter ---------------------------------------
    Rule(
        "STORE-LOAD-SIZE",
        MUST,
        "An object whose size is not the one its serde gives the layout (cut, emptied, grown) "
        "is read as a miss or a typed error, within the read's bound; never a hit.",
    ),
    Rule(
        "STORE-LOAD-CHANGED",
        MUST,
        "An object with a changed byte is a miss where the serde can tell (aesgcm's tag); "
        "where it cannot (none, fp8), the read still ends within its bound.",
    ),
    Rule("STORE-LOAD-MISSING", MUST, "A missing object is a miss, within the read's bound."),
    Rule(
        "STORE-LOAD-KEY",
        SHOULD,
        "Another key's object stored under an object's name is not served under it where the "
        "serde authenticates (aesgcm); elsewhere the read still ends within its bound.",
    ),
    Rule("STORE-LOAD-TEMP", MUST, "An unfinished write (.tmp) is never served: a miss."),
    Rule(
        "STORE-LOAD-DROP",
        MUST,
        "A connection dropped while an object is on its way makes that read a miss, a typed "
        "error or an exact hit (fetched again), within its bound; never other bytes.",
    ),
    Rule(
        "STORE-LOAD-NEIGHBOURS",
        MUST,
        "Damage to some objects of a store never costs an intact one its exact hit, before "
        "or after the damaged ones are read (a dropped connection included).",
    ),
    Rule(
        "STORE-SERVE-PREFIX",
        MUST,
        "A prefetch task with one object damaged at chunk c ends and gives, in every key "
        "group, exactly the chunks before c, each the bytes written (a damage the adapter "
        "cannot see: those chunks or all of them); never other bytes for an intact chunk.",
    ),
    Rule(
        "STORE-SERVE-AFTER",
        MUST,
        "A process that has read a damaged task still serves an intact task exact: a damaged "
        "read leaves no connection, buffer or cache that costs a later read.",
    ),
    Rule(
        "STORE-SERVE-LATER",
        MUST,
        "An object changed in the store after a process read it is, at its next read, the "
        "bytes written or a miss where the adapter can tell; the read ends.",
    ),
    Rule(
        "STORE-SERVE-MIXED",
        MUST,
        "A task whose key groups have different layouts is served exact when every object "
        "is intact.",
    ),
    Rule(
        "STORE-SERVE-TOGETHER",
        MUST,
        "Tasks in flight together, every object intact, end; a task over keys of its own is "
        "served exact, and of two over the same keys every hit is exact and every chunk a hit "
        "in at least one.",
    ),
    Rule(
        "STORE-SERVE-RACE",
        MUST,
        "An object rewritten whole while it is read is served as one version or missed: never "
        "a torn read (bytes of neither version), and every read ends.",
    ),
    Rule(
        "STORE-SERVE-CRASH",
        MUST,
        "After a writer is killed during a burst of stores, a fresh process serves every object "
        "LMCache had stored exact and nothing else with other bytes; an object's name holds its "
        "whole bytes or nothing, and fsck names every unfinished write the writer left.",
    ),
    Rule(
        "STORE-SERVE-READBACK",
        MUST,
        "An object a process stored is served back exact by that process once its adapter "
        "reported the store done and its L1 copy is gone.",
    ),
    Rule(
        "STORE-SERVE-CAPACITY",
        MUST,
        "An adapter given a capacity and an eviction policy, filled past it while read, never "
        "serves other bytes, holds at most its capacity once eviction has run, and serves "
        "every object it still holds.",
    ),
)

RULES: dict[str, Rule] = {rule.id: rule for rule in _RULES}


def rule(rule_id: str) -> Rule:
    """The registered rule ``rule_id``; KeyError names the unknown id."""
    try:
        return RULES[rule_id]
    except KeyError:
        raise KeyError(f"rule {rule_id!r} is not in conformance/core/rules.py") from None
