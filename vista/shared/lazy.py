"""`lazy_attributes`: a package's public names imported on first use, so importing the package (or its CLI module)
loads none of its heavy dependencies — ``--help`` stays instant.

>>> __getattr__ = lazy_attributes("json", {"JSONEncoder": "encoder", "JSONDecoder": "json.decoder"})
>>> __getattr__("JSONEncoder").__module__, __getattr__("JSONDecoder").__module__
('json.encoder', 'json.decoder')
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping


def lazy_attributes(package: str, exports: Mapping[str, str]) -> Callable[[str], object]:
    """A module ``__getattr__`` for ``package``: ``exports`` maps each public name to the module that defines it
    (relative to ``package``, or absolute); any other name is an `AttributeError`, as for a normal module."""

    def __getattr__(name: str) -> object:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        path = module if module.startswith(f"{package}.") else f"{package}.{module}"
        return getattr(importlib.import_module(path), name)

    return __getattr__
