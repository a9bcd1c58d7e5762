"""Hypothesis-driven mutation of the golden vectors.

Hypothesis draws a *plan*: which seed to start from, which mutation operators to chain, a
second seed to splice from, whether to repair the checksum, and a random seed. Each plan
expands into a batch of mutants, which amortizes Hypothesis' per-example cost while letting
it steer the search over seeds and operators. Operators are byte-level (bit flips, inserts,
deletes, duplication, truncation, splicing) and structure-aware (integer fields of the
format set to boundary values, format tokens inserted).
"""

from __future__ import annotations

import random
import struct
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from hypothesis import HealthCheck, Phase, Verbosity, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

from .decoders import Target

OPERATORS = (
    "flip",
    "byte",
    "insert",
    "delete",
    "duplicate",
    "truncate",
    "extend",
    "splice",
    "field",
    "token",
)

_BYTES = (0x00, 0x01, 0x20, 0x25, 0x2D, 0x2F, 0x30, 0x40, 0x5C, 0x7F, 0x80, 0xC3, 0xED, 0xFF)


@dataclass(frozen=True)
class Plan:
    seed: int
    other: int
    operators: tuple[str, ...]
    fixup: bool
    rng: int


def plans(n_seeds: int, operators: Sequence[str]) -> st.SearchStrategy[Plan]:
    return st.builds(
        Plan,
        st.integers(0, n_seeds - 1),
        st.integers(0, n_seeds - 1),
        st.lists(st.sampled_from(list(operators)), min_size=1, max_size=6).map(tuple),
        st.booleans(),
        st.integers(0, 2**32 - 1),
    )


def _interesting(width: int, current: int) -> list[int]:
    bits = 8 * width
    top = (1 << bits) - 1
    values = [
        0,
        1,
        2,
        7,
        8,
        9,
        255,
        256,
        0xFFFF,
        0x10000,
        top,
        top - 1,
        1 << (bits - 1),
        (1 << (bits - 1)) - 1,
        current + 1,
        current - 1,
        current * 2,
        current // 2,
    ]
    return [v & top for v in values]


def _mutate(op: str, data: bytes, other: bytes, target: Target, r: random.Random) -> bytes:
    buf = bytearray(data)
    n = len(buf)
    if op == "flip" and n:
        i = r.randrange(n)
        buf[i] ^= 1 << r.randrange(8)
    elif op == "byte" and n:
        buf[r.randrange(n)] = r.choice(_BYTES) if r.random() < 0.7 else r.randrange(256)
    elif op == "insert":
        i = r.randrange(n + 1)
        buf[i:i] = bytes(r.randrange(256) for _ in range(r.choice((1, 2, 4, 8))))
    elif op == "delete" and n:
        i = r.randrange(n)
        del buf[i : i + r.choice((1, 2, 4, 8, 16))]
    elif op == "duplicate" and n:
        i = r.randrange(n)
        j = min(n, i + r.choice((1, 4, 16, 64)))
        buf[j:j] = buf[i:j]
    elif op == "truncate" and n:
        del buf[r.randrange(n) :]
    elif op == "extend":
        buf += bytes(r.randrange(256) for _ in range(r.choice((1, 3, 16, 64))))
    elif op == "splice" and other:
        i, j = r.randrange(n + 1), r.randrange(len(other))
        buf = buf[:i] + other[j : j + r.choice((4, 16, 64, 256))]
    elif op == "field":
        fields = [(o, w) for o, w in target.fields(bytes(buf)) if o + w <= n]
        if fields:
            off, width = r.choice(fields)
            fmt = {1: "<B", 2: "<H", 4: "<I", 8: "<Q"}[width]
            (current,) = struct.unpack_from(fmt, buf, off)
            struct.pack_into(fmt, buf, off, r.choice(_interesting(width, current)))
    elif op == "token" and target.tokens:
        token = r.choice(target.tokens)
        i = r.randrange(n + 1)
        if r.random() < 0.5:
            buf[i:i] = token
        else:
            buf[i : i + len(token)] = token
    return bytes(buf)


def expand(plan: Plan, corpus: Sequence[bytes], target: Target, count: int) -> list[bytes]:
    """The plan's mutants (deterministic in the plan)."""
    out = []
    for j in range(count):
        r = random.Random(plan.rng * 1_000_003 + j)
        data = corpus[plan.seed]
        for op in plan.operators:
            data = _mutate(op, data, corpus[plan.other], target, r)
        if plan.fixup and target.fixup is not None:
            data = target.fixup(data)
        out.append(data[: target.max_len])
    return out


def campaign(
    target: Target,
    corpus: Sequence[bytes],
    on_input: Callable[[bytes], None],
    runs: int,
    deadline: float,
    per_plan: int = 64,
    seed: int | None = None,
) -> int:
    """Feed mutants to ``on_input`` until ``runs`` inputs or the monotonic ``deadline``;
    returns the number of inputs. ``on_input`` records failures itself and never raises.
    With ``seed`` the campaign is reproducible."""
    if not corpus:
        raise ValueError(f"target {target.name} has no seed inputs")
    operators = [op for op in OPERATORS if op != "token" or target.tokens]
    done = 0

    @settings(
        max_examples=200,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
        verbosity=Verbosity.quiet,
    )
    @given(plans(len(corpus), operators))
    def explore(plan: Plan) -> None:
        nonlocal done
        if done >= runs or time.monotonic() >= deadline:
            return
        for data in expand(plan, corpus, target, min(per_plan, runs - done)):
            on_input(data)
            done += 1

    rounds = 0
    while done < runs and time.monotonic() < deadline:
        if seed is None:
            explore()
        else:
            hypothesis_seed(seed * 7919 + rounds)(explore)()
        rounds += 1
    return done
