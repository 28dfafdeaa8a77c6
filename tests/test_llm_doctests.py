"""The runnable examples in the vista.llm docstrings stay true."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "vista.llm.messages",
    "vista.llm.answers",
    "vista.llm.schema",
    "vista.llm.config",
    "vista.llm.retry",
    "vista.llm.prices",
    "vista.llm.cache",
    "vista.llm.usage",
    "vista.testing.scripted",
    "vista.llm.embedded",
    "vista.testing.synthetic_server",
    "vista.llm.task_usage",
    "vista.llm.body_limit",
]


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name):
    result = doctest.testmod(importlib.import_module(name))
    assert result.failed == 0 and result.attempted > 0
