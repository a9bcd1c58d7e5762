"""Compile the C testee with the system ``cc`` into :data:`BUILD_DIR`.

In a source checkout the build folder is ``conformance/testees/c/build/``; an installed lmckv
builds into the per-user cache ``${XDG_CACHE_HOME:-~/.cache}/lmckv/c-testee/`` and never
writes into site-packages. ``$LMCKV_C_BUILD_DIR`` overrides both.

The binary is cached under a name derived from the SHA-256 of the sources, the flags and the
compiler's version, so an unchanged tree is built once and a changed one is rebuilt. Builds are
written to a temporary name and renamed into place, so parallel test workers never see a
half-written binary, and one build runs at a time under a lock on the build folder, so workers
that all find the binary missing build it once.

Command line: ``python -m lmckv.conformance.testees.c [--sanitize]`` prints the binary's path.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import functools
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from lmckv.base.resources import cache_dir, checkout_root, is_writable_dir, package_path

#: The C sources (package data of ``conformance.testees.c``).
SOURCE_DIR = package_path("lmckv.conformance.testees.c")


def _build_dir() -> Path:
    override = os.environ.get("LMCKV_C_BUILD_DIR")
    if override:
        return Path(override)
    if checkout_root() is not None and is_writable_dir(SOURCE_DIR):
        return SOURCE_DIR / "build"
    return cache_dir("c-testee")


BUILD_DIR = _build_dir()
BINARY_NAME = "lmckv-testee"

#: The standard and warnings the testee must build with (the issue's acceptance criteria).
STRICT_FLAGS = ("-std=c99", "-pedantic", "-Wall", "-Wextra", "-Werror")
RELEASE_FLAGS = ("-O2",)
#: AddressSanitizer + UndefinedBehaviorSanitizer; any finding aborts the process.
SANITIZE_FLAGS = (
    "-O1",
    "-g",
    "-fno-omit-frame-pointer",
    "-fsanitize=address,undefined",
    "-fno-sanitize-recover=all",
)
#: Environment for running a sanitized binary: abort on the first report, detect leaks.
SANITIZER_ENV = {
    "ASAN_OPTIONS": "abort_on_error=1:detect_leaks=1:allocator_may_return_null=0",
    "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1",
}


class BuildError(RuntimeError):
    """The compiler is missing or rejected the sources (its output is in the message)."""


def compiler() -> str:
    """``$CC`` if set, else ``cc``."""
    return os.environ.get("CC", "cc")


def sources() -> list[Path]:
    """Every C source and header of the testee, sorted (what the cache key covers)."""
    return sorted(p for p in SOURCE_DIR.iterdir() if p.suffix in (".c", ".h"))


@functools.cache
def _compiler_version(cc: str) -> str:
    try:
        out = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as exc:
        raise BuildError(f"C compiler {cc!r} is not usable: {exc}") from None
    if out.returncode != 0:
        raise BuildError(f"{cc} --version failed: {out.stderr.strip()}")
    return out.stdout.strip()


def flags(sanitize: bool) -> list[str]:
    """The full flag list of a build."""
    return [*STRICT_FLAGS, *(SANITIZE_FLAGS if sanitize else RELEASE_FLAGS)]


def _cache_key(cc: str, build_flags: list[str]) -> str:
    h = hashlib.sha256()
    h.update(_compiler_version(cc).encode())
    h.update("\0".join([cc, *build_flags]).encode())
    for path in sources():
        h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def _compile(cc: str, build_flags: list[str], output: Path, c_files: list[str]) -> None:
    cmd = [cc, *build_flags, "-o", str(output), *c_files]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    except (OSError, subprocess.SubprocessError) as exc:
        raise BuildError(f"cannot run {cc}: {exc}") from None
    if out.returncode != 0:
        raise BuildError(f"{' '.join(cmd)} failed:\n{out.stdout}{out.stderr}")


def build_testee(sanitize: bool = False) -> Path:
    """The path of the testee binary, compiling it first unless an identical build exists.

    ``sanitize`` builds with AddressSanitizer and UndefinedBehaviorSanitizer (run it with
    :data:`SANITIZER_ENV`). Raises :class:`BuildError` when the compiler is missing or the
    sources do not compile under ``-std=c99 -pedantic -Wall -Wextra -Werror``.
    """
    cc = compiler()
    build_flags = flags(sanitize)
    tag = "asan-ubsan" if sanitize else "release"
    target = BUILD_DIR / f"{tag}-{_cache_key(cc, build_flags)}" / BINARY_NAME
    c_files = [str(p) for p in sources() if p.suffix == ".c"]
    return _build_once(target, lambda out: _compile(cc, build_flags, out, c_files), tag)


def _build_once(target: Path, compile_to: Callable[[Path], None], tag: str) -> Path:
    """``target``, unless it exists, made by ``compile_to`` into a temporary file renamed
    into place, under the build lock; then older builds of ``tag`` are removed."""
    if _built(target):
        return target
    with _build_lock():
        if _built(target):  # another process built it while this one waited
            return target
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=target.name + ".", dir=target.parent)
        os.close(fd)
        tmp = Path(tmp_name)
        try:
            compile_to(tmp)
            tmp.chmod(0o755)
            os.replace(tmp, target)
        finally:
            tmp.unlink(missing_ok=True)
        _prune(tag, keep=target.parent)
    return target


def _built(target: Path) -> bool:
    return target.is_file() and os.access(target, os.X_OK)


@contextlib.contextmanager
def _build_lock() -> Iterator[None]:
    """An exclusive lock on the build folder, held across processes (pytest-xdist workers)."""
    BUILD_DIR.mkdir(parents=True, exist_ok=True)
    with open(BUILD_DIR / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _prune(tag: str, keep: Path) -> None:
    """Remove older builds of the same kind (stale source hashes)."""
    for old in BUILD_DIR.glob(f"{tag}-*"):
        if old != keep and old.is_dir():
            shutil.rmtree(old, ignore_errors=True)


@functools.cache
def sanitizers_available() -> str | None:
    """None when ``cc`` can build and run an ASan+UBSan program, else the reason it cannot."""
    cc = compiler()
    if shutil.which(cc) is None:
        return f"no C compiler {cc!r} on PATH"
    with tempfile.TemporaryDirectory() as tmp:
        src, exe = Path(tmp) / "probe.c", Path(tmp) / "probe"
        src.write_text("int main(void) { return 0; }\n")
        out = subprocess.run(
            [cc, *SANITIZE_FLAGS, "-o", str(exe), str(src)], capture_output=True, text=True
        )
        if out.returncode != 0:
            return f"{cc} cannot build with -fsanitize=address,undefined: {out.stderr.strip()}"
        run = subprocess.run([str(exe)], capture_output=True, text=True, env=sanitizer_env())
        if run.returncode != 0:
            return f"a sanitized program does not run here: {run.stderr.strip()[:300]}"
    return None


#: The native fuzzer: libFuzzer needs clang (``$LMCKV_FUZZ_CC``, else the first clang found).
LIBFUZZER_FLAGS = (
    "-O1",
    "-g",
    "-fno-omit-frame-pointer",
    "-fsanitize=fuzzer,address,undefined",
    "-fno-sanitize-recover=all",
)
LIBFUZZER_HARNESS = SOURCE_DIR / "fuzz" / "lk_fuzz_decoders.c"
LIBFUZZER_NAME = "lmckv-fuzz-decoders"


CLANG_NAMES = ("clang", *(f"clang-{v}" for v in range(20, 13, -1)))


def fuzz_compiler() -> str:
    """``$LMCKV_FUZZ_CC`` if set, else ``clang`` or the newest ``clang-N`` on PATH."""
    if "LMCKV_FUZZ_CC" in os.environ:
        return os.environ["LMCKV_FUZZ_CC"]
    return next((name for name in CLANG_NAMES if shutil.which(name)), "clang")


def build_libfuzzer() -> Path:
    """The libFuzzer binary over the testee's decoders (``fuzz/lk_fuzz_decoders.c`` plus every
    source but ``lk_testee.c``), built with ASan and UBSan. BuildError without clang."""
    cc = fuzz_compiler()
    if shutil.which(cc) is None:
        raise BuildError(f"no {cc} on PATH: libFuzzer needs clang (gcc has no -fsanitize=fuzzer)")
    build_flags = [*STRICT_FLAGS, *LIBFUZZER_FLAGS]
    h = hashlib.sha256(_cache_key(cc, build_flags).encode() + LIBFUZZER_HARNESS.read_bytes())
    target = BUILD_DIR / f"libfuzzer-{h.hexdigest()[:16]}" / LIBFUZZER_NAME
    c_files = [str(LIBFUZZER_HARNESS)]
    c_files += [str(p) for p in sources() if p.suffix == ".c" and p.name != "lk_testee.c"]
    return _build_once(target, lambda out: _compile(cc, build_flags, out, c_files), "libfuzzer")


def sanitizer_env() -> dict[str, str]:
    """This process's environment plus :data:`SANITIZER_ENV`."""
    return {**os.environ, **SANITIZER_ENV}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sanitize", action="store_true", help="ASan + UBSan build")
    args = parser.parse_args(argv)
    try:
        print(build_testee(sanitize=args.sanitize))
    except BuildError as exc:
        print(exc, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
