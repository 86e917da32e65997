"""Finding a name on a class the way Python's attribute lookup does, without running anything.

Every tracker that reads a class attribute (an instance's method, a slot descriptor, a module's
`__call__`, a `super()` lookup) goes through here, so all of them agree on what Python would find:
the first class along `__mro__` whose own `__dict__` holds the name. Metaclass attributes are not
looked at: they are not visible through instances.
"""

from __future__ import annotations

from typing import Any

MISSING: Any = object()


def class_lookup(cls: type, name: str, after: type | None = None) -> tuple[Any, type | None]:
    """(attribute, owning class) of `name` along `cls.__mro__`, starting after `after` (as
    `super()` does); (MISSING, None) when no class defines it."""
    mro = cls.__mro__
    if after is not None:
        mro = mro[mro.index(after) + 1 :]
    for klass in mro:
        namespace = type.__dict__["__dict__"].__get__(klass)
        if name in namespace:
            return namespace[name], klass
    return MISSING, None


def class_attribute(cls: type, name: str, default: Any = MISSING) -> Any:
    """The raw attribute (descriptor, function, value) `name` found on `cls`, or `default`."""
    attr, _ = class_lookup(cls, name)
    return default if attr is MISSING else attr
