"""`PythonRegex`: a pydantic string field that must be a Python regular expression (a coding profile's rule, a
cohort query's text term), so that a pattern that does not compile is a one-line validation error, not a crash later.

>>> from pydantic import BaseModel, ValidationError
>>> class Rule(BaseModel):
...     match: PythonRegex
>>> Rule(match="C34.*").match
'C34.*'
>>> try:
...     Rule(match="((")
... except ValidationError as exc:
...     print(exc.errors()[0]["msg"])
Value error, pattern '((' is not a valid regular expression (missing ), ...)
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator


def _compiles(pattern: str) -> str:
    try:
        re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"pattern {pattern!r} is not a valid regular expression ({exc})") from None
    return pattern


PythonRegex = Annotated[str, AfterValidator(_compiles)]
"""A string that `re.compile` accepts."""
