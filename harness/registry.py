"""A strict, named registry of design choices.

Every axis of the design space (advantage estimator, importance ratio, surrogate, loss aggregation,
...) is a `Registry` of small pure functions. The training loop looks a choice up by the name
written in the config and never branches on algorithm names. A duplicate name raises at import; an
unknown name raises with the allowed names and a "did you mean" suggestion (lm-eval-harness style).
"""

from __future__ import annotations

import difflib
from typing import Callable, Generic, Iterator, TypeVar

T = TypeVar("T", bound=Callable)


class RegistryError(KeyError):
    """Raised for an unknown or duplicate registry key. `str()` is one readable line."""

    def __str__(self) -> str:  # KeyError quotes its message; we want plain text
        return str(self.args[0]) if self.args else ""


def suggest(name: str, options: list[str]) -> str:
    """Return ' (did you mean X?)' when a close match exists, else ''."""
    close = difflib.get_close_matches(name, options, n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


class Registry(Generic[T]):
    """Maps a snake_case name to a function. `@REG.register("name")` adds one; `REG["name"]` gets it."""

    def __init__(self, axis: str):
        self.axis = axis
        self._items: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        def decorator(fn: T) -> T:
            if name in self._items:
                raise RegistryError(f"{self.axis}: {name!r} is already registered")
            self._items[name] = fn
            return fn

        return decorator

    def __getitem__(self, name: str) -> T:
        try:
            return self._items[name]
        except KeyError:
            raise RegistryError(
                f"{self.axis}: unknown choice {name!r}; allowed: {', '.join(self.names())}"
                + suggest(name, self.names())
            ) from None

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def names(self) -> list[str]:
        return sorted(self._items)

    def doc(self, name: str) -> str:
        """First paragraph of the registered function's docstring (used by `--help`)."""
        text = (self[name].__doc__ or "").strip()
        return " ".join(text.split("\n\n")[0].split())
