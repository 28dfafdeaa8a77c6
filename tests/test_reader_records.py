"""`MedsDataset` reads every fixture exactly as a row-by-row reading says (tests/reference_records.py).

The reader builds events a batch at a time (codes respelled once per distinct code, times and values converted once
per distinct value, events made in bulk); these tests hold it to the plain per-row meaning on the project's own
synthetic data and on the OMOP-, Synthea- and MIMIC-style fixtures, at the default batch size and at one that splits
subjects across batches, for full and targeted reads: same events, same codes and source codes, same units, visit
ids and kinds, same provenance.
"""

from __future__ import annotations

import pytest

from reference_records import reference_records
from spellings import WRITERS
from vista.shared.meds.reader import MedsDataset
from vista.shared.records import Event


@pytest.fixture(scope="module")
def datasets(tmp_path_factory):
    from vista.shared.synth import SynthConfig, generate

    root = tmp_path_factory.mktemp("reader_records")
    out = {name: WRITERS[name](root / name) for name in sorted(WRITERS)}
    generate(SynthConfig(n_subjects=120, seed=11, workers=1, shard_size=50), root / "synth", progress=False)
    out["synth"] = root / "synth"
    return out


@pytest.mark.parametrize("name", ["synth", "omop", "synthea", "mimic"])
@pytest.mark.parametrize("batch_size", [65_536, 97])
def test_records_match_the_row_by_row_reading(datasets, name, batch_size):
    dataset = MedsDataset(datasets[name], batch_size=batch_size)
    expected = reference_records(datasets[name], dataset.shards, dataset.profile)
    got = dataset.load_patients(expected)
    assert list(got) == list(expected)
    for sid, record in expected.items():
        assert got[sid] == record, f"{name}: subject {sid} differs"
        assert all(type(e) is Event for e in got[sid].events)
        last = record.events[-1].event_id
        assert got[sid].provenance(last) == record.provenance(last)
    some = list(expected)[1::7]
    assert dataset.load_patients(some) == {sid: expected[sid] for sid in some}


def test_the_fixtures_exercise_every_event_field(datasets):
    """The comparison above means something: across the fixtures every optional field is set somewhere."""
    seen = set()
    for name, root in datasets.items():
        dataset = MedsDataset(root)
        for record in dataset.load_patients(dataset.subject_ids()).values():
            for event in record.events:
                seen.update(f for f in Event.__slots__ if getattr(event, f) is not None)
    assert seen == set(Event.__slots__)
