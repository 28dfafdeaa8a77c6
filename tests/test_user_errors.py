"""Errors the user can act on declare it themselves (`vista.shared.errors.UserError`): no list of import strings that a
rename or a failed import would silently empty, and `user_errors()` imports nothing."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import subprocess
import sys

import pytest

from vista.shared.cli_kit import run_command, user_errors
from vista.shared.errors import UserError

INTERNAL_ERRORS = {
    # failures of a call or a worker, recorded per patient or re-raised with context by their caller
    "vista.shared.llm.body_limit.BodyTooLarge", "vista.shared.llm.errors.BackendError", "vista.shared.llm.errors.LLMCallFailed",
    "vista.shared.llm.errors.LLMEndpointFailure", "vista.shared.llm.errors.ResponseTooLarge", "vista.shared.llm.errors.SchemaError",
    "vista.shared.synth.generator.SynthShardError", "vista.shared.meds.writer.MedsWriteError", "vista.shared.prompts.PromptNotFoundError",
    "vista.shared.llm.openai_backend._TooLarge",
    "vista.shared.llm._shared_budget.BudgetGone",  # the budget actor is gone: the client refuses waiting requests as stopped
    # caught by the one command that raises them (one line, exit 2 there)
    "vista.shared.meds.omop.OmopRouteError", "vista.pipeline.config.StageChoiceError", "trajonco.judge.errors.EvaluationInputError", "trajonco.judge.runs.RunFileError",
    "baselines.errors.BaselineError", "baselines.errors.FeatureMismatchError", "baselines.errors.MetricInputError",
    "baselines.errors.NotFittedError", "baselines.errors.TrainTestOverlapError", "benchmarks.report.errors.ReportError",
}
"""Exception classes of the packages that are deliberately not `UserError`s."""


def _exception_classes() -> dict[str, type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for package in ("vista", "trajonco", "baselines", "benchmarks"):
        root = importlib.import_module(package)
        for info in pkgutil.walk_packages(root.__path__, package + "."):
            if info.name.endswith("__main__"):
                continue
            module = importlib.import_module(info.name)
            for name, obj in vars(module).items():
                if inspect.isclass(obj) and issubclass(obj, BaseException) and obj.__module__ == info.name:
                    found[f"{info.name}.{name}"] = obj
    return found


@pytest.mark.slow
def test_every_exception_class_says_whether_the_user_can_fix_it():
    """A new error class is either a `UserError` (one line, exit 2) or named here as internal: never neither."""
    classes = _exception_classes()
    undecided = sorted(name for name, cls in classes.items() if not issubclass(cls, UserError) and name not in INTERNAL_ERRORS)
    assert undecided == []
    assert sorted(INTERNAL_ERRORS - set(classes)) == []  # the list names real classes
    for name in ("vista.shared.meds.errors.MedsDataError", "vista.shared.storage.StorageError", "vista.patient_search.errors.PatientSearchError",
                 "trajonco.cohorts.errors.CohortError", "trajonco.chunking.ChunkingError", "vista.shared.atomic.DataModeError"):
        assert issubclass(classes[name], user_errors()), name


def test_user_errors_imports_no_package():
    """The commands build their ``except`` clause before ``--help`` runs: it imports only the light CLI kit."""
    code = ("import sys; from vista.shared.cli_kit import user_errors; user_errors(); "
            "print(sorted(m for m in sys.modules if m.startswith(('vista.', 'trajonco')) and m not in ('vista.shared', 'vista.shared.errors', 'vista.shared.cli_kit', 'vista.shared.atomic')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_a_user_error_is_one_line_and_exit_status_2(capsys):
    from argparse import Namespace

    from trajonco.cohorts.errors import CohortError

    def handler(args):
        raise CohortError("labels.parquet: subject 7: field 'prediction_time': before the record\n  starts")

    assert run_command(Namespace(handler=handler), user_errors()) == 2
    assert capsys.readouterr().err == "error: labels.parquet: subject 7: field 'prediction_time': before the record starts\n"
