"""The examples in the RAG baseline's and the evaluation's docstrings run and still hold."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["vista.rag.config", "vista.rag.chunks", "vista.rag.index", "vista.rag.answers", "vista.rag.generate",
           "vista.evaluation.normalize", "vista.evaluation.expected", "vista.evaluation.scorers",
           "vista.evaluation.judge", "vista.evaluation.bootstrap"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    failures, tried = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert tried > 0 and failures == 0
