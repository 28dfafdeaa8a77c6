"""The runnable examples in the vista.display docstrings stay true."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["vista.toa.timeline_view", "vista.display.model", "vista.display.structured", "vista.display.answers",
           "vista.display.render", "vista.display.citations"]


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name):
    result = doctest.testmod(importlib.import_module(name))
    assert result.failed == 0 and result.attempted > 0
