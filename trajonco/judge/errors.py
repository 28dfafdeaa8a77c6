"""The one error type of the judge and the human evaluation: input the user must fix (a run file, an answers file).

Messages name the file, the row or subject and the field. The CLI handlers turn it into
`vista.shared.errors.CommandLineError`, so it prints as one line with exit status 2. `read_json_model` reads the JSON
files both write (a judge report, a packet set, a packet key) with such errors.
"""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

M = TypeVar("M", bound=BaseModel)


class EvaluationInputError(ValueError):
    """A prediction run, judge report, packet folder or answers file that cannot be used as given."""


def read_json_model(path: Path, model: type[M], *, missing: str, what: str | None = None) -> M:
    """``model`` from the JSON file ``path``, else an `EvaluationInputError`: ``missing`` when there is no such file,
    or the file and the first invalid field (after ``not a <what>:`` when ``what`` is given).

    >>> class Key(BaseModel):
    ...     seed: int
    >>> read_json_model(Path("nowhere.json"), Key, missing="nowhere.json: no key file")
    Traceback (most recent call last):
    trajonco.judge.errors.EvaluationInputError: nowhere.json: no key file
    """
    if not path.is_file():
        raise EvaluationInputError(missing)
    try:
        return model.model_validate_json(path.read_text(encoding="utf-8"))
    except ValidationError as exc:
        err = exc.errors()[0]
        raise EvaluationInputError(f"{path}: {f'not a {what}: ' if what else ''}field "
                                   f"{'.'.join(map(str, err['loc']))}: {err['msg']}") from None
