"""Rule-out work-ups of non-cases: one cancer code at an imaging or biopsy visit with a benign result, never repeated
(what keeps a single cancer code from marking a case)."""

from __future__ import annotations

import random

import numpy as np

from vista.shared.synth import notes
from vista.shared.synth.cancers import CANCER_KEYS, CANCERS
from vista.shared.synth.catalog import PROCEDURES
from vista.shared.synth.course.disease import sites_for_sex
from vista.shared.synth.course.draws import iso_date, sentence_case
from vista.shared.synth.course.truth import RuleOutTruth
from vista.shared.synth.course.writer import CourseWriter
from vista.shared.synth.population import Population
from vista.shared.synth.visits import AMB, K_WORKUP


def write_rule_outs(writer: CourseWriter, population: Population, np_rng: np.random.Generator) -> list[RuleOutTruth]:
    """One rule-out visit for each non-case drawn for one (each with its own random stream, seeded from ``np_rng``)."""
    subjects = np.flatnonzero(population.rule_out_cancer >= 0)
    seeds = np_rng.integers(0, 2**63 - 1, size=len(subjects), dtype=np.int64)
    out = []
    for subject, seed in zip(subjects.tolist(), seeds.tolist()):
        truth = _rule_out(writer, population, subject, random.Random(seed))
        if truth is not None:
            out.append(truth)
    return out


def _rule_out(writer: CourseWriter, population: Population, subject: int, rng: random.Random) -> RuleOutTruth | None:
    """A work-up step of the cancer's paths, somewhere inside the record (None: a record under 60 days)."""
    profile = CANCERS[CANCER_KEYS[int(population.rule_out_cancer[subject])]]
    start, end = float(population.record_start[subject]), float(population.record_end[subject])
    if end - start < 60:
        return None
    day = start + 30 + rng.random() * (end - start - 60)
    step = rng.choice([s for path in profile.workup for s in path.steps if s.note])
    procedures = list(step.procedures) + ([rng.choice(step.choice)] if step.choice else [])
    visit_id, time = writer.visit(subject, day, AMB, K_WORKUP, panels=step.labs)
    for dx in step.dx:
        writer.row(subject, visit_id, time, writer.ids.dx[dx], 15, tagged=False)
    for procedure in procedures:
        writer.row(subject, visit_id, time, writer.ids.proc[procedure], 25, tagged=False)
    site = sites_for_sex(profile, bool(population.female[subject]))[0]
    code_tag = writer.row(subject, visit_id, time, writer.ids.site[site.icd10], 12)
    if step.note == "RADIOLOGY":
        exam = sentence_case(PROCEDURES[procedures[0]].phrase)
        text = notes.radiology_report(rng, iso_date(day), exam, f"rule out {profile.name.lower()}",
                                      ["Small indeterminate finding without suspicious features."],
                                      "Indeterminate, likely benign; short-interval follow-up suggested.")
    else:
        specimen, diagnosis, details = notes.background_pathology(rng, procedures[0])
        text = notes.pathology_report(rng, iso_date(day), specimen, diagnosis + " Negative for malignancy.", details)
    note_tag = writer.note(subject, visit_id, time, step.note, text, 180)
    return RuleOutTruth(subject, profile.key, day, [code_tag, note_tag])
