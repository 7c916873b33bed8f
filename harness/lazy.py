"""A module imported on first use, so that commands which never compute (`rlablate --help`,
`rlablate config`, the config checks of a sweep) do not pay torch's 2-5 s import.

    torch = lazy_module("torch")      # nothing imported yet
    torch.zeros(3)                    # imports torch; later attribute reads are plain dict lookups

The design-choice modules (`harness/algos/`) use it: the config rules read their registries'
properties at load time, and only the loop calls their tensor functions. `isinstance(x,
torch.Tensor)` and every other attribute work as on the real module. (The standard library's
lazy loader replaces the module in sys.modules before it has run, which torch's own import-time
registrations do not survive; this proxy never stands in sys.modules.) Only the modules of
`IMPORTERS` can be made lazy, each by a plain import statement: nothing is imported by a string
(tests/test_security.py).
"""

from __future__ import annotations

import sys
import types


def _import_torch():
    import torch
    return torch


IMPORTERS = {"torch": _import_torch}


class LazyModule(types.ModuleType):
    """Stands for the module `name`; the first attribute read imports it and caches the value."""

    def __init__(self, name: str):
        super().__init__(name)
        self.__dict__["_lazy_name"] = name

    def __getattr__(self, attr: str):  # called only for attributes not cached yet
        value = getattr(IMPORTERS[self.__dict__["_lazy_name"]](), attr)
        self.__dict__[attr] = value
        return value

    def __repr__(self) -> str:
        name = self.__dict__["_lazy_name"]
        return f"<lazy module {name!r} ({'imported' if name in sys.modules else 'not imported'})>"


def lazy_module(name: str):
    """The module itself when it is already imported, else a LazyModule standing for it (`name`
    must be a key of IMPORTERS)."""
    if name not in IMPORTERS:
        raise KeyError(f"lazy_module({name!r}): only {', '.join(IMPORTERS)} (add an importer)")
    return sys.modules.get(name) or LazyModule(name)
