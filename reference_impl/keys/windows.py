"""AttnWindowDesc: per-object-group attention windows, in chunks (SPEC "Attention
windows", rules KEY-WINDOW-VALUES, KEY-WINDOW-HIT)."""

from __future__ import annotations

from dataclasses import dataclass

from .errors import DescriptorError

FULL_ATTENTION = -1
"""Window value of a group that needs the whole prefix."""


@dataclass(frozen=True)
class AttnWindowDesc:
    """``num_chunks_in_sw[g]`` is how many trailing prefix chunks object group ``g``
    needs for a hit: ``-1`` for full attention, ``w >= 1`` for a sliding window of ``w``
    chunks (a mamba-style state is ``1``)."""

    num_chunks_in_sw: list[int]

    def __post_init__(self) -> None:
        for index, w in enumerate(self.num_chunks_in_sw):
            if isinstance(w, bool) or not isinstance(w, int):
                raise DescriptorError(
                    f"AttnWindowDesc: window {index} must be an int, got {w!r}",
                    rule="KEY-WINDOW-VALUES",
                )
            if w == 0 or w < FULL_ATTENTION:
                raise DescriptorError(
                    "AttnWindowDesc: each window must be -1 (full attention) "
                    f"or >= 1 chunk, got {w}",
                    rule="KEY-WINDOW-VALUES",
                )

    @property
    def num_object_groups(self) -> int:
        """Number of object groups this descriptor covers."""
        return len(self.num_chunks_in_sw)

    def _window(self, object_group_idx: int) -> int:
        if not 0 <= object_group_idx < len(self.num_chunks_in_sw):
            raise DescriptorError(
                f"object group {object_group_idx} is outside 0..{len(self.num_chunks_in_sw) - 1}",
                rule="KEY-WINDOW-VALUES",
            )
        return self.num_chunks_in_sw[object_group_idx]

    def is_full_attention(self, object_group_idx: int) -> bool:
        """Whether group ``object_group_idx`` (0-based) attends to the whole prefix."""
        return self._window(object_group_idx) == FULL_ATTENTION

    def required_chunks(self, object_group_idx: int, num_prefix_chunks: int) -> range:
        """KEY-WINDOW-HIT: the chunk indices of a ``num_prefix_chunks`` prefix that must be
        present for the group to serve a hit: all of them for full attention, else the
        last ``min(w, num_prefix_chunks)``."""
        if num_prefix_chunks < 0:
            raise DescriptorError(
                f"num_prefix_chunks must be >= 0, got {num_prefix_chunks}", rule="KEY-WINDOW-HIT"
            )
        window = self._window(object_group_idx)
        if window == FULL_ATTENTION:
            return range(num_prefix_chunks)
        return range(max(0, num_prefix_chunks - window), num_prefix_chunks)


DEFAULT_ATTN_WINDOW_DESC = AttnWindowDesc(num_chunks_in_sw=[FULL_ATTENTION])
"""One full-attention object group: the default when no windows are supplied."""
