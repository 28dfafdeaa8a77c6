"""Small TOML files that configure the project (coding profiles, event-definition profiles): parse and validate
into a pydantic model, with one-line errors naming the file and every wrong field.

>>> from pydantic import BaseModel
>>> class Point(BaseModel):
...     x: int
>>> parse_toml_model("x = 3", "p.toml", Point, ValueError).x
3
>>> parse_toml_model("x = 'a'", "p.toml", Point, ValueError)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
ValueError: p.toml: field x: Input should be a valid integer...
"""

from __future__ import annotations

import tomllib
from typing import TypeVar

from pydantic import BaseModel, ValidationError

Model = TypeVar("Model", bound=BaseModel)


def parse_toml_model(text: str, where: str, model: type[Model], error: type[Exception]) -> Model:
    """``text`` (TOML) validated as ``model``; ``error(message)`` raised, naming ``where``, when it is not."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise error(f"{where}: not valid TOML ({exc})") from None
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(f"field {'.'.join(str(p) for p in e['loc']) or '(top level)'}: {e['msg']}"
                             for e in exc.errors())
        raise error(f"{where}: {problems}") from None
