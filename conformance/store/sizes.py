"""STORE-SIZE: the sizes LMCache writes for the objects of one model and object group.

An object of a group holds one chunk in the group's layout: ``nbytes`` of the full chunk, or,
for the last chunk of a sequence, a whole number of its tokens (LMCache stores a partial chunk
at its own size, unpadded). Raw and fp8 objects carry no header, so their size is all that can
be checked: against ``--object-bytes`` when the operator gives it, else against the size most
objects of the group have (the full chunk), learned from the store in a first pass. A partial
chunk cut at a token boundary and an object truncated at one look alike: the summary counts
partial chunks apart, so that an unusual number of them shows.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

#: LMCache's default chunk size in tokens.
DEFAULT_CHUNK_TOKENS = 256

#: A group of objects that share a layout: (model_name, object_group_id).
Group = tuple[str, int]


@dataclass(frozen=True)
class SizeRule:
    """The sizes one group's objects may have: ``full`` payload bytes, or a whole number of
    its ``chunk_tokens`` tokens below that."""

    full: int
    chunk_tokens: int = DEFAULT_CHUNK_TOKENS
    learned: bool = True

    @property
    def token_bytes(self) -> int | None:
        """The bytes of one token, when the full size is a whole number of tokens."""
        ok = self.full > 0 and self.full % self.chunk_tokens == 0
        return self.full // self.chunk_tokens if ok else None

    def is_partial(self, payload: int) -> bool:
        token = self.token_bytes
        return token is not None and 0 < payload < self.full and payload % token == 0

    def problem(self, payload: int) -> str | None:
        """Why ``payload`` bytes is no size of this group's objects, or None."""
        if payload == self.full or self.is_partial(payload):
            return None
        source = "most objects of its group have" if self.learned else "--object-bytes gives"
        tokens = f" or a whole number of its {self.chunk_tokens} tokens below that"
        return f"{payload} bytes of content, where {source} {self.full}" + (
            tokens if self.token_bytes else ""
        )


@dataclass
class SizeLearner:
    """Counts the payload sizes of each group in the first pass."""

    counts: dict[Group, Counter[int]] = field(default_factory=dict)

    def add(self, group: Group, payload: int) -> None:
        if payload > 0:
            self.counts.setdefault(group, Counter())[payload] += 1

    def rules(self, chunk_tokens: int) -> dict[Group, SizeRule]:
        """Each group's rule: its most common size (the largest of equally common ones) is
        the full chunk."""
        return {
            group: SizeRule(max(c, key=lambda size: (c[size], size)), chunk_tokens)
            for group, c in self.counts.items()
        }
