"""The examples in the agents' and pipeline's docstrings run and still hold."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["trajonco.cancers", "trajonco.pipeline", "trajonco.agents.schemas", "trajonco.agents.memory",
           "trajonco.agents.prompts", "trajonco.agents.evidence", "trajonco.agents.budget", "trajonco.budgets",
           "trajonco.pipeline_config", "trajonco.prediction_rows", "trajonco.sync_run"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    failures, tried = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert tried > 0 and failures == 0
