"""A strict, named registry: name -> entry (a function or a constructor) with its properties.

Every axis of the design space (advantage estimator, importance ratio, surrogate, aggregation, KL,
...) is a `Registry` of small pure functions; so are the rollout engines, the tasks, the sweep
executors and the CLI subcommands (name -> constructor). A choice's properties live on its entry
(`register(name, **meta)`, read with `.meta(name).needs_critic`), declared with their defaults when
the registry is made, so the loop and the config rules ask an entry what it needs and never
compare a choice's name (lm-eval-harness's registry with properties, submitit's executor table).

A duplicate name, or a property the registry does not declare, raises at import; an unknown name
raises with the allowed names and a "did you mean" suggestion. `register_lazy` adds an entry whose
object comes from a loader called on first use (a function that imports an optional extra such as
vLLM), so listing the choices never imports them.
"""

from __future__ import annotations

import difflib
from types import MappingProxyType, SimpleNamespace
from typing import Any, Callable, Iterator, Mapping


class RegistryError(KeyError):
    """Raised for an unknown or duplicate registry key. `str()` is one readable line."""

    def __str__(self) -> str:  # KeyError quotes its message; we want plain text
        return str(self.args[0]) if self.args else ""


def suggest(name: str, options: list[str]) -> str:
    """Return ' (did you mean X?)' when a close match exists, else ''."""
    close = difflib.get_close_matches(name, options, n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


class Registry:
    """Maps a snake_case name to an object and its properties.

    `REG = Registry("algo.kl", needs_reference=True)` declares the properties and their defaults;
    `@REG.register("k3", ...)` adds a function; `REG["k3"]` gets it; `REG.meta("k3").needs_reference`
    reads a property; `REG.where(needs_reference=True)` lists the names that have it."""

    def __init__(self, axis: str, **props: Any):
        self.axis = axis
        self.props: Mapping[str, Any] = MappingProxyType(dict(props))
        self._items: dict[str, Any] = {}
        self._lazy: dict[str, Callable[[], Any]] = {}
        self._meta: dict[str, SimpleNamespace] = {}

    def _add_meta(self, name: str, meta: dict) -> None:
        if name in self._meta:
            raise RegistryError(f"{self.axis}: {name!r} is already registered")
        unknown = sorted(set(meta) - set(self.props))
        if unknown:
            raise RegistryError(f"{self.axis}: {name!r}: unknown propert{'y' if len(unknown) == 1 else 'ies'} "
                                f"{', '.join(unknown)}; declared: {', '.join(self.props) or 'none'}")
        self._meta[name] = SimpleNamespace(**{**self.props, **meta})

    def register(self, name: str, **meta: Any) -> Callable:
        """Decorator: `@REG.register("name", prop=value)`."""
        def decorator(obj):
            self.add(name, obj, **meta)
            return obj
        return decorator

    def add(self, name: str, obj: Any, **meta: Any) -> None:
        self._add_meta(name, meta)
        self._items[name] = obj

    def register_lazy(self, name: str, loader: Callable[[], Any], **meta: Any) -> None:
        """An entry whose object is `loader()`, called on the first lookup (its import may fail
        with the extra's install hint; listing names and properties never calls it)."""
        self._add_meta(name, meta)
        self._lazy[name] = loader

    def _unknown(self, name: str) -> RegistryError:
        return RegistryError(f"{self.axis}: unknown choice {name!r}; allowed: {', '.join(self.names())}"
                             + suggest(str(name), self.names()))

    def __getitem__(self, name: str) -> Any:
        if name in self._lazy:
            self._items[name] = self._lazy[name]()
            del self._lazy[name]
        try:
            return self._items[name]
        except KeyError:
            raise self._unknown(name) from None

    def meta(self, name: str) -> SimpleNamespace:
        """The entry's properties (every declared one, defaults filled in)."""
        try:
            return self._meta[name]
        except KeyError:
            raise self._unknown(name) from None

    def where(self, **props: Any) -> list[str]:
        """The names whose properties equal all of `props`, sorted."""
        return [n for n in self.names() if all(getattr(self._meta[n], k) == v for k, v in props.items())]

    def __contains__(self, name: object) -> bool:
        return name in self._meta

    def __iter__(self) -> Iterator[str]:
        return iter(self._meta)

    def names(self) -> list[str]:
        return sorted(self._meta)

    def doc(self, name: str) -> str:
        """First paragraph of the entry's docstring (used by `--help` and `rlablate choices`)."""
        text = (self[name].__doc__ or "").strip()
        return " ".join(text.split("\n\n")[0].split())
