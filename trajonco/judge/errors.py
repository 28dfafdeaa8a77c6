"""The one error type of the judge and the human evaluation: input the user must fix (a run file, an answers file).

Messages name the file, the row or subject and the field. The CLI handlers turn it into
`vista.errors.CommandLineError`, so it prints as one line with exit status 2.
"""

from __future__ import annotations


class EvaluationInputError(ValueError):
    """A prediction run, judge report, packet folder or answers file that cannot be used as given."""
