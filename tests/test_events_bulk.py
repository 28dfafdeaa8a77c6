"""`make_events` gives ordinary `Event`s; `gc_paused` puts the collector back as it found it, across threads."""

from __future__ import annotations

import dataclasses
import gc
import threading
from datetime import datetime

import pytest

from vista.shared.events_bulk import gc_paused, make_events
from vista.shared.records import Event

FIELDS = ("e3", datetime(2020, 1, 5, 9), "ICD10CM//C34.11", 11.2, "note", "DIAGNOSIS//ICD//10//C3411", "mg/dL",
          "v7", "procedure")


def test_made_events_are_events_in_every_respect():
    made = make_events(*([value] for value in FIELDS))[0]
    plain = Event(*FIELDS)
    assert type(made) is Event and made == plain and hash(made) == hash(plain) and repr(made) == repr(plain)
    assert [getattr(made, f.name) for f in dataclasses.fields(Event)] == list(FIELDS)
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.code = "X"  # type: ignore[misc]
    assert dataclasses.replace(made, code="X").code == "X"


def test_gc_paused_restores_the_collector_as_it_was():
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()  # off before, off after
    finally:
        gc.enable()


def test_gc_paused_comes_back_on_only_when_the_last_thread_leaves():
    inside, leave = threading.Event(), threading.Event()

    def hold() -> None:
        with gc_paused():
            inside.set()
            leave.wait(10)

    other = threading.Thread(target=hold)
    other.start()
    inside.wait(10)
    with gc_paused():
        pass
    assert not gc.isenabled()  # the other thread is still making events
    leave.set()
    other.join(10)
    assert gc.isenabled()
