"""One fuzzing campaign: one target, one engine, in this process.

``python -m lmckv.conformance.fuzz.worker --target NAME --engine atheris|mutate --runs N
--seconds S --stats PATH [--c-binary PATH [--sanitized]] [--findings DIR]``

Engines: ``atheris`` (coverage-guided, libFuzzer, over the reference instrumented for
coverage) and ``mutate`` (Hypothesis-driven mutation of the golden vectors). Every input
is checked against the reference's properties and, with ``--c-binary``, queued for the
differential comparison with the C testee. Statistics and findings go to ``--stats``.
"""

from __future__ import annotations

import argparse
import atexit
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .campaign import Campaign

#: Imported under atheris' instrumentation when the engine is atheris (see main).
INSTRUMENTED = ("lmckv.reference_impl",)
#: Compiled kernels (numba, Triton) are left as they are: coverage probes inserted into
#: their Python source would break compilation, and their logic is held byte for byte to
#: quant_rules by their own tests.
NOT_INSTRUMENTED = (
    "lmckv.reference_impl.kv_codec.quant_numba",
    "lmckv.reference_impl.kv_codec.quant_triton",
)


def _finish(campaign: Campaign, args: argparse.Namespace) -> None:
    from .findings import dump

    dump(Path(args.stats), {**campaign.finish(), "engine": args.engine})


def _dict_entry(token: bytes) -> str:
    """One libFuzzer dictionary line: the token with every byte escaped."""
    escaped = "".join(f"\\x{b:02x}" for b in token)
    return f'"{escaped}"\n'


def run_atheris(campaign: Campaign, args: argparse.Namespace) -> None:
    import atheris

    target = campaign.target
    with tempfile.TemporaryDirectory(prefix="lmckv-fuzz-") as tmp:
        seeds_dir = Path(tmp) / "seeds"
        corpus_dir = Path(args.corpus) if args.corpus else Path(tmp) / "corpus"
        seeds_dir.mkdir()
        corpus_dir.mkdir(parents=True, exist_ok=True)
        for i, seed in enumerate(target.seeds()):
            (seeds_dir / f"seed-{i:04d}").write_bytes(seed[: target.max_len])
        dictionary = Path(tmp) / "tokens.dict"
        dictionary.write_text("".join(_dict_entry(tok) for tok in target.tokens))
        atexit.register(_finish, campaign, args)
        deadline = time.monotonic() + args.seconds

        def one_input(data: bytes) -> None:
            campaign(data)
            # libFuzzer's own time limit ends the process without running atexit handlers,
            # so the campaign stops itself, after writing its statistics
            if campaign.inputs >= args.runs or time.monotonic() >= deadline:
                _finish(campaign, args)
                shutil.rmtree(tmp, ignore_errors=True)
                sys.stderr.flush()
                os._exit(0)

        argv = [
            sys.argv[0],
            str(corpus_dir),
            str(seeds_dir),
            f"-atheris_runs={args.runs + 1}",
            f"-max_len={target.max_len}",
            f"-seed={args.seed}",
            "-print_final_stats=0",
            "-close_fd_mask=1",
        ]
        if target.tokens:
            argv.append(f"-dict={dictionary}")
        atheris.Setup(argv, one_input, internal_libfuzzer=True)
        atheris.Fuzz()


def run_mutate(campaign: Campaign, args: argparse.Namespace) -> None:
    from .mutate import campaign as mutation_campaign

    corpus = [s[: campaign.target.max_len] for s in campaign.target.seeds()]
    if args.corpus and Path(args.corpus).is_dir():
        corpus += [
            p.read_bytes()[: campaign.target.max_len] for p in sorted(Path(args.corpus).iterdir())
        ]
    deadline = time.monotonic() + args.seconds
    mutation_campaign(campaign.target, corpus, campaign, args.runs, deadline, seed=args.seed)
    _finish(campaign, args)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", required=True)
    parser.add_argument("--engine", choices=["atheris", "mutate"], required=True)
    parser.add_argument("--runs", type=int, required=True)
    parser.add_argument("--seconds", type=float, required=True)
    parser.add_argument("--stats", required=True)
    parser.add_argument("--findings")
    parser.add_argument("--corpus", help="atheris corpus directory (kept between runs)")
    parser.add_argument("--c-binary")
    parser.add_argument("--sanitized", action="store_true")
    parser.add_argument("--alloc-every", type=int, default=1)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    if args.engine == "atheris":
        import atheris

        atheris.enabled_hooks.add("str")
        with atheris.instrument_imports(include=list(INSTRUMENTED), exclude=list(NOT_INSTRUMENTED)):
            from ...reference_impl import keys, kv_codec, protocol  # noqa: F401
    from ..testees.c.build import sanitizer_env
    from .campaign import Campaign
    from .checks import Limits
    from .decoders import TARGETS

    campaign = Campaign(
        TARGETS[args.target],
        Limits(alloc_every=args.alloc_every),
        Path(args.findings) if args.findings else None,
        [args.c_binary] if args.c_binary else None,
        sanitizer_env() if args.sanitized else None,
    )
    if args.engine == "atheris":
        run_atheris(campaign, args)
    else:
        run_mutate(campaign, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
