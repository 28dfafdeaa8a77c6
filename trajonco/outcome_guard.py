"""Does a patient's visible history already name the cancer we are asked to predict? (the outcome-leak check)

Single-patient commands take a prediction time from the user; nothing stops that time from lying after the
diagnosis. `prior_target_codes` finds the target cancer's diagnosis codes (the cohort definitions' code sets, matched
on canonical codes, so any dataset spelling counts) strictly before the time, so the command can say so.

>>> from datetime import datetime
>>> from vista.shared.records import CodeCatalog, Event, PatientRecord
>>> rec = PatientRecord(1, "data/0.parquet", 0, [Event("e0", datetime(2019, 3, 1), "ICD10CM//C34.11", None, None),
...                                             Event("e1", datetime(2020, 3, 1), "ICD10CM//R05.9", None, None)])
>>> [e.event_id for e in prior_target_codes(rec, "lung", datetime(2020, 1, 1))]
['e0']
>>> prior_target_codes(rec, "lung", datetime(2019, 1, 1))
[]
"""

from __future__ import annotations

from datetime import datetime

import polars as pl

from trajonco.cohorts.codesets import CodeHierarchy
from trajonco.cohorts.definition import load_definition
from trajonco.cohorts.phenotype import cancer_of_code
from vista.shared.meds import schema
from vista.shared.records import CodeCatalog, Event, PatientRecord


def prior_target_codes(record: PatientRecord, cancer: str, before: datetime | None,
                       catalog: CodeCatalog | None = None) -> list[Event]:
    """Events of ``record`` before ``before`` (all timed events when None) coding ``cancer`` ('any': any of the 15).

    With the dataset's ``catalog`` (canonical codes and parents), SNOMED CT descendants of the definition's concepts
    count too, exactly as in cohort building.
    """
    definition = load_definition("any_cancer" if cancer == "any" else cancer)
    hierarchy = None
    if catalog is not None:
        hierarchy = CodeHierarchy.from_parents({code: info.parent_codes for code, info in catalog.items()})
    events = [e for e in record.events if e.time is not None and (before is None or e.time < before)]
    if not events:
        return []
    codes = pl.DataFrame({schema.CODE: [e.code for e in events]})
    hits = codes.select(cancer_of_code(definition, hierarchy))["cancer"].is_not_null().to_list()
    return [e for e, hit in zip(events, hits) if hit]


def leak_warning(record: PatientRecord, cancer: str, before: datetime | None,
                 catalog: CodeCatalog | None = None) -> str | None:
    """One line for the user when the visible history already codes the cancer, else None."""
    found = prior_target_codes(record, cancer, before, catalog)
    if not found:
        return None
    first = found[0]
    where = "in the record" if before is None else f"before the prediction time {before:%Y-%m-%d}"
    name = "a target cancer" if cancer == "any" else f"{cancer} cancer"
    return (f"subject {record.subject_id}: {len(found)} diagnosis code(s) of {name} {where} (first: "
            f"{first.original_code} on {first.time:%Y-%m-%d}, event {first.event_id}) — the agents can read the outcome")
