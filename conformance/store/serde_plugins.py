"""Serde plugins: packages that add serdes to LMCache with its ``register_serde_factory`` (in
``lmcache.v1.distributed.serde.factory``, the same in 0.5.3 to 0.5.7rc2; a name registered
twice is a ValueError there). LMCache has no entry points for them: an operator imports the
package, or calls its registration function, before building a store. lmckv does the same
where it is told to, with ``--serde-plugin MODULE[:FUNCTION]`` (fsck, bench e2e, report, the
suite):

- ``MODULE`` alone is imported (a package that registers when imported);
- ``MODULE:FUNCTION`` is imported and ``FUNCTION()`` called (``lmcache_turbo_quant_serde:register``
  registers ``tqai``).

Every process lmckv starts for the same run loads the same plugins: :data:`PLUGINS_ENV` holds
them, comma-separated (LMCache's worker scripts, which do not import lmckv, read it the same
way). A serde name a plugin registers gets a catalogue row where it has none (content not
checked: lmckv knows nothing of its frames), so fsck takes a spec naming it and the end-to-end
table gives it a row.
"""

from __future__ import annotations

import importlib
import os
import re
from dataclasses import dataclass

from . import catalogue

#: The plugins every process of a run loads, comma-separated ``MODULE[:FUNCTION]``.
PLUGINS_ENV = "LMCKV_SERDE_PLUGINS"
SERDE_PACKAGE = "lmcache.v1.distributed.serde"
_DOTTED = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
#: The plugins this process has loaded, and what each registered (a plugin is loaded once:
#: LMCache refuses a name registered twice).
_LOADED: dict[str, list[str]] = {}


class PluginError(Exception):
    """A plugin that cannot be loaded (the message is one line)."""


@dataclass(frozen=True)
class Plugin:
    """``MODULE[:FUNCTION]``: what to import, and what to call after."""

    module: str
    function: str = ""

    def __str__(self) -> str:
        return f"{self.module}:{self.function}" if self.function else self.module


def parse(text: str) -> Plugin:
    """``MODULE[:FUNCTION]``, both dotted Python names; PluginError otherwise."""
    module, _, function = text.strip().partition(":")
    if not _DOTTED.fullmatch(module) or (function and not _DOTTED.fullmatch(function)):
        raise PluginError(f"--serde-plugin {text!r}: expected MODULE[:FUNCTION]")
    return Plugin(module, function)


def registered_names() -> set[str]:
    """The serde names LMCache's factory registers now (empty where lmcache is absent)."""
    try:
        package = importlib.import_module(SERDE_PACKAGE)
        return {str(n) for n in package.get_registered_serde_types()}
    except Exception:  # lmcache absent, or not importable here
        return set()


def load(plugin: Plugin) -> list[str]:
    """Import (and call) ``plugin``; the serde names it registered, each given a catalogue row
    where it has none. PluginError says why it could not be loaded."""
    before = registered_names()
    try:
        module = importlib.import_module(plugin.module)
        if plugin.function:
            getattr(module, plugin.function)()
    except Exception as exc:  # a plugin's failure, whatever it is, is one line
        first = (str(exc).strip().splitlines() or [""])[0]
        raise PluginError(f"serde plugin {plugin}: {type(exc).__name__}: {first}") from None
    added = sorted(registered_names() - before)
    for name in added:
        if name not in catalogue.SERDES:
            catalogue.register_serde(
                catalogue.Serde(name, checkable=True, lossy=True, origin=f"the plugin {plugin}")
            )
    return added


def load_all(texts: list[str]) -> dict[str, list[str]]:
    """Load every plugin of ``texts`` and of :data:`PLUGINS_ENV`, and put them all in
    :data:`PLUGINS_ENV` for the processes this one starts; per plugin, what it registered."""
    inherited = [t for t in os.environ.get(PLUGINS_ENV, "").split(",") if t.strip()]
    plugins = list(dict.fromkeys(parse(t) for t in [*inherited, *texts]))
    for plugin in plugins:
        if str(plugin) not in _LOADED:
            _LOADED[str(plugin)] = load(plugin)
    loaded = {str(p): _LOADED[str(p)] for p in plugins}
    if plugins:
        os.environ[PLUGINS_ENV] = ",".join(str(p) for p in plugins)
    return loaded
