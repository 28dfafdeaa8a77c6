"""`generate`: the seeded synthetic EHR generator, shard by shard over worker processes, straight to MEDS files.

Shard k (``shard_size`` subjects) draws everything from ``numpy.random.default_rng([seed, k])`` and writes its own
``data/<split>/<k>.parquet`` files, so the bytes depend only on the config, never on the number of workers or the
order in which shards finish. Inside a shard the work is vectorized numpy except the per-case oncology course.
Ground truth (``ground_truth/oncology.jsonl``, ``ground_truth/subjects.parquet``) and the MEDS metadata are
assembled by the parent in shard order.
"""

from __future__ import annotations

import logging
import math
import os
import resource
import shutil
import sys
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from functools import lru_cache
from multiprocessing import get_context
from pathlib import Path

import meds
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict

from vista.shared.errors import UserError
from vista.shared.meds import schema
from vista.shared.atomic import atomic_path, atomic_write_text, make_dirs
from vista.shared.meds.writer import write_codes, write_data_shard, write_dataset_metadata, write_subject_splits
from vista.shared.synth import catalog
from vista.shared.synth.cancers import CANCER_KEYS, CANCERS
from vista.shared.synth.config import SynthConfig
from vista.shared.synth.ground_truth import (
    SUBJECT_COLUMNS,
    BiomarkerTruth,
    ImagingStudy,
    OncologyRecord,
    PathologyFinding,
    PerformanceStatus,
    ProgressionTruth,
    SmokingHistory,
    StageTruth,
    TreatmentComponentTruth,
    TreatmentLineTruth,
    phenotype_index,
)
from vista.shared.synth.course import CaseTruth, CourseWriter, write_case_courses, write_rule_outs
from vista.shared.synth.population import (
    TRAP_LATE_CONFIRMATION, TRAP_PREVALENT, TRAP_PRIOR_CODE, TRAP_SHORT_HISTORY, Population, sample_population, to_days,
)
from vista.shared.synth.rows import STATIC_TIME, US_PER_DAY, US_PER_MINUTE, RowBuffer, Rows, days_to_us
from vista.shared.synth.signals import sample_drifts, sample_signals
from vista.shared.synth.trajectories import ShardContext, add_background_visits, add_derived_visits, generate_visit_rows, place_signals
from vista.shared.synth.visits import VisitBuffer, Visits
from vista.shared.synth.vocabulary import code_ids, code_metadata, vocabulary

log = logging.getLogger(__name__)

SPLITS = (schema.TRAIN_SPLIT, schema.TUNING_SPLIT, schema.HELD_OUT_SPLIT)
GROUND_TRUTH_DIR = "ground_truth"
ONCOLOGY_FILE = "ground_truth/oncology.jsonl"
SUBJECTS_FILE = "ground_truth/subjects.parquet"
CONFIG_FILE = "metadata/synth_config.json"
_PARTS = "ground_truth/.parts"
_SPLIT_STREAM = 7
_TRAP_NAMES = {TRAP_PREVALENT: "prevalent", TRAP_LATE_CONFIRMATION: "late_confirmation", TRAP_SHORT_HISTORY: "short_history",
               TRAP_PRIOR_CODE: "prior_code"}


class SynthOutputError(RuntimeError, UserError):
    """The output directory cannot be used (names the directory and why)."""


class SynthShardError(RuntimeError):
    """Generating one shard failed (names the shard and its subject range; the cause is chained)."""


class SynthSummary(BaseModel):
    """What one `generate` call produced and how fast."""

    model_config = ConfigDict(frozen=True)

    out_dir: str
    subjects: int
    rows: int
    notes: int
    shards: int
    data_files: int
    cancer_patients: dict[str, int]
    incident_cases: dict[str, int]
    rule_outs: int
    traps: dict[str, int]
    seconds: float
    rows_per_second: float
    parent_peak_rss_mb: float
    worker_peak_rss_mb: dict[int, float]


@dataclass(slots=True)
class ShardResult:
    shard: int
    subjects: int
    rows: int
    notes: int
    data_files: int
    cancer_patients: Counter = field(default_factory=Counter)
    incident_cases: Counter = field(default_factory=Counter)
    rule_outs: int = 0
    traps: Counter = field(default_factory=Counter)
    pid: int = 0
    peak_rss_mb: float = 0.0


@lru_cache(maxsize=65536)
def _date_of(day: int) -> date:
    return date(1970, 1, 1) + timedelta(days=day)


def _day_to_date(day: float) -> date:
    return _date_of(int(math.floor(day)))


def _us_to_date(us: int) -> date:
    return date(1970, 1, 1) + timedelta(days=int(us // US_PER_DAY))


def _us_to_datetime(us: int) -> datetime:
    return datetime(1970, 1, 1) + timedelta(microseconds=int(us))


def _assign_splits(config: SynthConfig, shard: int, n: int) -> np.ndarray:
    perm = np.random.default_rng([config.seed, shard, _SPLIT_STREAM]).permutation(n)
    n_train = int(round(n * config.splits.train))
    n_tune = int(round(n * config.splits.tuning))
    n_tune = min(n_tune, n - n_train)
    out = np.full(n, 2, dtype=np.int8)
    out[perm[:n_train]] = 0
    out[perm[n_train:n_train + n_tune]] = 1
    return out


def _static_rows(pop: Population, w: CourseWriter, rows: Rows) -> dict[int, int]:
    """Demographic static rows, MEDS_BIRTH and MEDS_DEATH (after the subject's last event); returns death tags."""
    ids = w.ids
    n = pop.n
    subj = np.arange(n, dtype=np.int32)
    rb = w.rows
    rb.add(subj, STATIC_TIME, np.where(pop.female, ids.gender[0], ids.gender[1]), order=0)
    rb.add(subj, STATIC_TIME, np.array(ids.race)[pop.race], order=0)
    rb.add(subj, STATIC_TIME, np.where(pop.hispanic, ids.ethnicity[0], ids.ethnicity[1]), order=0)
    rb.add(subj, days_to_us(pop.birth), ids.birth, order=0)
    last = np.full(n, np.iinfo(np.int64).min, dtype=np.int64)
    np.maximum.at(last, rows.subject, rows.time)
    dead = np.flatnonzero(np.isfinite(pop.death))
    death_tags = {}
    if len(dead):
        death_us = np.maximum(days_to_us(pop.death[dead]), last[dead] + 60 * US_PER_MINUTE)
        tags = np.arange(w.n_tags, w.n_tags + len(dead), dtype=np.int32)
        w.n_tags += len(dead)
        rb.add(subj[dead], death_us, ids.death, order=2, tag=tags)
        death_tags = dict(zip(dead.tolist(), tags.tolist()))
    return death_tags


def _remap_codes(rows: Rows) -> None:
    """Write codes as they were in use on each row's date: older CPT/ICD-10 codes, then ICD-9-CM before Oct 2015."""
    v = vocabulary()
    code, t = rows.code, rows.time
    for new_id, old_id, since_us in v.revisions:
        m = (code == new_id) & (t < since_us)
        code[m] = old_id
    cut = int(days_to_us(np.array([to_days(catalog.ICD10_START)]))[0])
    twin = v.icd9_of[code]
    m = (twin >= 0) & (t < cut) & (t != STATIC_TIME)
    code[m] = twin[m]


_KEY_BASE_US = -3_786_825_600_000_000  # 1850-01-01 in microseconds since the epoch


def _sort_key(rows: Rows, split_of: np.ndarray, subject_id: np.ndarray) -> np.ndarray:
    """One int64 per row ordering by (split, subject, time with static rows first, order, code).

    Bits: 14 subject rank, 27 minutes since 1850 (static = 0), 2 order, 17 code id; ties keep generation order
    under a stable sort.
    """
    n = len(split_of)
    if n >= 1 << 14 or len(vocabulary()) >= 1 << 17:
        raise ValueError("shard too large for the packed sort key (at most 16383 subjects per shard)")
    rank = np.empty(n, dtype=np.int64)
    rank[np.lexsort((subject_id, split_of))] = np.arange(n)
    static = rows.time == STATIC_TIME
    minutes = np.where(static, 0, (rows.time - _KEY_BASE_US) // US_PER_MINUTE + 1)
    if minutes.min(initial=0) < 0 or minutes.max(initial=0) >= 1 << 27:
        raise ValueError("event time outside 1850-2105, cannot be sorted with the packed key")
    return (rank[rows.subject] << 46) | (minutes << 19) | (rows.order.astype(np.int64) << 17) | rows.code.astype(np.int64)


@dataclass(slots=True)
class _ShardRows:
    """A shard's rows after sorting and de-duplication, with where each tagged row ended up."""

    rows: Rows
    split_of: np.ndarray
    r_split: np.ndarray
    tag_pos: np.ndarray
    first_of_subject: np.ndarray


def _simulate(config: SynthConfig, shard: int, n: int):
    """Population, oncology courses, background care and all rows of one shard (unsorted)."""
    rng = np.random.default_rng([config.seed, shard])
    ids = code_ids()
    w0, w1 = to_days(config.window_start), to_days(config.window_end) + 1.0 - 1e-6
    pop = sample_population(config, rng, shard * config.shard_size, n)
    signals = sample_signals(pop, rng)
    drifts = sample_drifts(pop, rng)
    vb, rb, texts = VisitBuffer(), RowBuffer(), []
    writer = CourseWriter(ids, vb, rb, texts)
    truths = write_case_courses(writer, pop, rng, w1)
    ctx = ShardContext(pop, ids, texts, config.note_rate, w0, w1)
    bg_ids = add_background_visits(ctx, rng, vb)
    rule_outs = write_rule_outs(writer, pop, rng)
    snapshot = vb.build()
    bg = Visits(*(getattr(snapshot, f)[bg_ids] for f in Visits.__slots__))
    sig_vis, sig_codes = place_signals(ctx, rng, vb, bg, bg_ids, signals)
    add_derived_visits(ctx, rng, vb, vb.build())
    visits = vb.build()
    generate_visit_rows(ctx, rng, visits, rb, drifts, sig_vis, sig_codes)
    death_tags = _static_rows(pop, writer, _peek(rb))
    rows = rb.build()
    _remap_codes(rows)
    return pop, rows, texts, writer.n_tags, truths, rule_outs, death_tags


def _sort_rows(config: SynthConfig, shard: int, pop: Population, rows: Rows, n_tags: int) -> _ShardRows:
    """Sort by (split, subject, time, order, code), merge duplicate value-less rows, locate tagged rows."""
    split_of = _assign_splits(config, shard, pop.n)
    perm = np.argsort(_sort_key(rows, split_of, pop.subject_id), kind="stable")
    rows = rows.take(perm)
    same = np.zeros(len(rows), dtype=bool)
    if len(rows) > 1:
        same[1:] = ((rows.subject[1:] == rows.subject[:-1]) & (rows.time[1:] == rows.time[:-1]) & (rows.code[1:] == rows.code[:-1])
                    & np.isnan(rows.numeric[1:]) & np.isnan(rows.numeric[:-1]) & (rows.text[1:] < 0) & (rows.text[:-1] < 0))
    keep = ~same
    final_pos = np.cumsum(keep) - 1  # a merged row maps onto the row it duplicated
    tag_pos = np.full(n_tags, -1, dtype=np.int64)
    tagged = rows.tag >= 0
    tag_pos[rows.tag[tagged]] = final_pos[tagged]
    rows = rows.take(np.flatnonzero(keep))
    first_of_subject = np.full(pop.n, -1, dtype=np.int64)
    starts = np.flatnonzero(np.concatenate([[True], rows.subject[1:] != rows.subject[:-1]]))
    first_of_subject[rows.subject[starts]] = starts
    return _ShardRows(rows, split_of, split_of[rows.subject], tag_pos, first_of_subject)


def _write_data(config: SynthConfig, shard: int, out: Path, pop: Population, sr: _ShardRows, texts: list[str]) -> int:
    """One MEDS data file per split of the shard; returns how many were written."""
    rows = sr.rows
    texts_arr = pa.array(texts, type=pa.large_string())
    codes_arr = pa.array(vocabulary().codes, type=pa.string())
    written = 0
    for s_idx, split in enumerate(SPLITS):
        lo, hi = np.searchsorted(sr.r_split, [s_idx, s_idx + 1])
        if hi <= lo:
            continue
        part = rows.take(np.arange(lo, hi))
        table = pa.table({
            schema.SUBJECT_ID: pa.array(pop.subject_id[part.subject], pa.int64()),
            schema.TIME: pa.array(part.time, type=pa.int64(), mask=part.time == STATIC_TIME).cast(pa.timestamp("us")),
            schema.CODE: codes_arr.take(pa.array(part.code, pa.int32())),
            schema.NUMERIC_VALUE: pa.array(part.numeric, type=pa.float32(), mask=np.isnan(part.numeric)),
            schema.TEXT_VALUE: texts_arr.take(pa.array(part.text, type=pa.int32(), mask=part.text < 0)),
        }, schema=schema.DATA_SCHEMA)
        write_data_shard(table, out / schema.DATA_DIR / split / f"{shard}.parquet", compression=config.compression)
        written += 1
    return written


def generate_shard(config: SynthConfig, shard: int, out_dir: str) -> ShardResult:
    """Generate, sort and write one shard's data files and ground-truth parts."""
    out = Path(out_dir)
    n = min(config.shard_size, config.n_subjects - shard * config.shard_size)
    ids = code_ids()
    vocab = vocabulary()
    pop, rows, texts, n_tags, truths, rule_outs, death_tags = _simulate(config, shard, n)
    sr = _sort_rows(config, shard, pop, rows, n_tags)
    data_files = _write_data(config, shard, out, pop, sr, texts)
    rows, split_of, tag_pos, first_of_subject = sr.rows, sr.split_of, sr.tag_pos, sr.first_of_subject

    # ground truth
    n_notes = int(np.count_nonzero(np.isin(rows.code, list(ids.note.values()))))
    result = ShardResult(shard, n, len(rows), n_notes, data_files, pid=os.getpid())
    event_of_tag = np.where(tag_pos >= 0, tag_pos - first_of_subject[rows.subject[np.maximum(tag_pos, 0)]], -1)

    def eids(tags) -> list[str]:
        return [f"e{int(event_of_tag[t])}" for t in tags if t >= 0 and event_of_tag[t] >= 0]

    def data_file(i: int) -> str:
        return f"{schema.DATA_DIR}/{SPLITS[split_of[i]]}/{shard}.parquet"

    def code_str(t: int) -> str:
        return vocab.codes[int(rows.code[tag_pos[t]])]

    enc_ids = np.array(ids.encounter)
    enc_rows = np.flatnonzero(np.isin(rows.code, enc_ids))
    record_start = np.full(n, -1, dtype=np.int64)
    if len(enc_rows):
        es = rows.subject[enc_rows]
        firsts = enc_rows[np.concatenate([[True], es[1:] != es[:-1]])]
        record_start[rows.subject[firsts]] = rows.time[firsts]
    timed = rows.time != STATIC_TIME
    last_time = np.full(n, np.iinfo(np.int64).min, dtype=np.int64)
    np.maximum.at(last_time, rows.subject[timed], rows.time[timed])

    # cancer-code rows of the cancer each subject has (or was ruled out for), grouped by subject in time order
    target = np.where(pop.cancer >= 0, pop.cancer, pop.rule_out_cancer)
    cpos = np.flatnonzero(vocab.cancer_of[rows.code] >= 0)
    cpos = cpos[vocab.cancer_of[rows.code[cpos]] == target[rows.subject[cpos]]]
    csub = rows.subject[cpos]
    bounds = np.flatnonzero(csub[1:] != csub[:-1]) + 1
    positions_of = dict(zip(csub[np.concatenate([[0], bounds])].tolist(), np.split(cpos, bounds))) if len(cpos) else {}
    icd9_ids = np.array([c.startswith(schema.ICD9CM) for c in vocab.codes])

    dx_day = np.full(n, np.nan)
    incident = np.zeros(n, dtype=bool)
    exclusion = np.full(n, None, dtype=object)
    icd9 = np.zeros(n, dtype=bool)
    truth_by_subject = {t.subject: t for t in truths}
    lines: list[str] = []
    for i in sorted(set(positions_of) | set(truth_by_subject)):
        positions = positions_of.get(i, np.zeros(0, np.int64))
        times = rows.time[positions].tolist()
        idx, reason = phenotype_index(times, int(record_start[i]))
        icd9[i] = bool(icd9_ids[rows.code[positions]].any())
        if pop.cancer[i] < 0:
            continue
        key = CANCER_KEYS[int(pop.cancer[i])]
        result.cancer_patients[key] += 1
        if idx is not None:
            incident[i] = True
            dx_day[i] = times[idx] // US_PER_DAY
            result.incident_cases[key] += 1
        else:
            exclusion[i] = reason
        if pop.trap[i]:
            result.traps[_TRAP_NAMES[int(pop.trap[i])]] += 1
        lines.append(_oncology_record(truth_by_subject[i], pop, i, positions.tolist(), idx, reason, data_file(i), eids, code_str, rows, vocab,
                                      record_start[i], last_time[i], death_tags, int(first_of_subject[i])).model_dump_json())
    result.rule_outs = len(rule_outs)
    result.traps["rule_out"] += len(rule_outs)
    ro_cancer = np.full(n, None, dtype=object)
    ro_day = np.full(n, np.nan)
    for ro in rule_outs:
        ro_cancer[ro.subject] = ro.cancer
        ro_day[ro.subject] = ro.day
    has_cancer = pop.cancer >= 0
    prior_day = np.full(n, np.nan)
    for t in truths:
        prior_day[t.subject] = t.prior_code_day

    def dates(days: np.ndarray) -> pa.Array:
        ok = np.isfinite(days)
        return pa.array(np.where(ok, np.floor(days), 0).astype(np.int32), type=pa.date32(), mask=~ok)

    subjects = pa.table({
        "subject_id": pa.array(pop.subject_id, pa.int64()),
        "split": pa.array(np.array(SPLITS, dtype=object)[split_of].tolist(), pa.string()),
        "sex": pa.array(np.where(pop.female, "F", "M").tolist(), pa.string()),
        "birth_date": dates(pop.birth),
        "record_start": dates(np.where(record_start >= 0, record_start // US_PER_DAY, np.nan).astype(np.float64)),
        "record_end": dates((last_time // US_PER_DAY).astype(np.float64)),
        "death_date": dates(pop.death),
        "cancer": pa.array([CANCER_KEYS[c] if c >= 0 else None for c in pop.cancer.tolist()], pa.string()),
        "clinical_diagnosis_date": dates(np.where(has_cancer, pop.diagnosis, np.nan)),
        "diagnosis_date": dates(dx_day),
        "is_incident_case": pa.array(incident),
        "exclusion_reason": pa.array(exclusion.tolist(), pa.string()),
        "trap_prevalent": pa.array(pop.trap == TRAP_PREVALENT),
        "trap_late_confirmation": pa.array(pop.trap == TRAP_LATE_CONFIRMATION),
        "trap_short_history": pa.array(pop.trap == TRAP_SHORT_HISTORY),
        "trap_prior_code": pa.array(np.isfinite(prior_day)),
        "prior_code_date": dates(prior_day),
        "trap_rule_out": pa.array(np.array([c is not None for c in ro_cancer.tolist()], dtype=bool)),
        "rule_out_cancer": pa.array(ro_cancer.tolist(), pa.string()),
        "rule_out_date": dates(ro_day),
        "icd9_cancer_codes": pa.array(icd9),
    }, schema=SUBJECTS_SCHEMA)
    parts = out / _PARTS
    with atomic_path(parts / f"oncology-{shard:06d}.jsonl") as tmp:
        tmp.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    with atomic_path(parts / f"subjects-{shard:06d}.parquet") as tmp:
        pq.write_table(subjects, tmp)
    result.peak_rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    return result


def _peek(rb: RowBuffer) -> Rows:
    """The rows collected so far, leaving them in the buffer."""
    rows = rb.build()
    rb.add(rows.subject, rows.time, rows.code, rows.numeric, rows.text, rows.order, rows.tag, rows.visit)
    return rows


SUBJECTS_SCHEMA = pa.schema([
    ("subject_id", pa.int64()), ("split", pa.string()), ("sex", pa.string()), ("birth_date", pa.date32()), ("record_start", pa.date32()),
    ("record_end", pa.date32()), ("death_date", pa.date32()), ("cancer", pa.string()), ("clinical_diagnosis_date", pa.date32()),
    ("diagnosis_date", pa.date32()), ("is_incident_case", pa.bool_()), ("exclusion_reason", pa.string()), ("trap_prevalent", pa.bool_()),
    ("trap_late_confirmation", pa.bool_()), ("trap_short_history", pa.bool_()), ("trap_prior_code", pa.bool_()),
    ("prior_code_date", pa.date32()), ("trap_rule_out", pa.bool_()), ("rule_out_cancer", pa.string()),
    ("rule_out_date", pa.date32()), ("icd9_cancer_codes", pa.bool_()),
])
assert tuple(SUBJECTS_SCHEMA.names) == SUBJECT_COLUMNS


def _oncology_record(truth: CaseTruth, pop: Population, i: int, positions: list[int], idx: int | None, reason: str | None, data_file: str,
                     eids, code_str, rows: Rows, vocab, record_start_us: int, last_us: int, death_tags: dict[int, int],
                     subject_first: int) -> OncologyRecord:
    profile = CANCERS[truth.cancer]
    first = positions[idx] if idx is not None else (positions[0] if positions else None)
    dx_events = [int(positions[idx]), int(positions[idx + 1])] if idx is not None else []
    opt = truth.stage
    stage = StageTruth(system=truth.stage_system, group=opt.group, t=opt.t, n=opt.n, m=opt.m,
                       date=_day_to_date(truth.stage_day) if np.isfinite(truth.stage_day) else None, event_ids=eids(truth.stage_tags))
    bdate = _day_to_date(truth.biomarker_day) if np.isfinite(truth.biomarker_day) else None
    bids = eids(truth.biomarker_tags)
    biomarkers = [BiomarkerTruth(name=nm, result=res, date=bdate, event_ids=bids) for nm, res in truth.biomarkers] if bids else []
    imaging = [ImagingStudy(date=_day_to_date(im.day), modality=catalog.PROCEDURES[im.procedure].phrase, code=code_str(im.tags[0]),
                            purpose=im.purpose, impression=im.finding, event_ids=eids(im.tags)) for im in truth.imaging if im.tags and eids(im.tags)]
    pathology = [PathologyFinding(date=_day_to_date(p.day), procedure=catalog.PROCEDURES[p.procedure].phrase if p.procedure in catalog.PROCEDURES else p.procedure,
                                  code=code_str(p.tags[0]), diagnosis=p.diagnosis, event_ids=eids(p.tags)) for p in truth.pathology if eids(p.tags)]
    lines = []
    for lt in truth.lines:
        if not lt.components:
            continue
        comps = [TreatmentComponentTruth(modality=c.kind, label=c.label, drugs=c.drugs,
                                         procedure_code=catalog.PROCEDURES[c.procedure].code if c.procedure else None,
                                         start_date=_day_to_date(c.start), end_date=_day_to_date(c.end)) for c in lt.components]
        lines.append(TreatmentLineTruth(line=lt.line, regimen=lt.plan, intent=lt.intent, start_date=_day_to_date(lt.components[0].start),
                                        end_date=_day_to_date(lt.end) if lt.end is not None and lt.end_reason != "ongoing" else None,
                                        end_reason=lt.end_reason, components=comps, event_ids=eids(lt.tags)))
    progressions = [ProgressionTruth(date=_day_to_date(d), line=ln, event_ids=eids(tags)) for d, ln, tags in truth.progressions if eids(tags)]
    ecog = [PerformanceStatus(date=_day_to_date(d), ecog=v, event_ids=eids([tag])) for d, v, tag in truth.ecog if eids([tag])]
    smoking = SmokingHistory(status=truth.smoking_status, pack_years=truth.pack_years, quit_year=truth.quit_year, event_ids=eids(truth.smoking_tags))
    death_tag = death_tags.get(i)
    has_death = np.isfinite(pop.death[i])
    trap = _TRAP_NAMES.get(int(pop.trap[i]))
    return OncologyRecord(
        subject_id=int(pop.subject_id[i]), data_file=data_file, cancer=truth.cancer, cancer_name=profile.name,
        icd_code=vocab.codes[int(rows.code[first])] if first is not None else "",
        diagnosis_date=_us_to_date(int(rows.time[positions[idx]])) if idx is not None else None,
        diagnosis_time=_us_to_datetime(int(rows.time[positions[idx]])) if idx is not None else None,
        diagnosis_event_ids=[f"e{p - subject_first}" for p in dx_events],
        clinical_diagnosis_date=_day_to_date(truth.clinical_diagnosis), is_incident_case=idx is not None,
        exclusion_reason=None if idx is not None else reason, trap=trap, workup_path=truth.workup_path,
        site=truth.site.site, laterality=truth.site.laterality, histology=truth.histology.name, icdo3_morphology=truth.histology.icdo3,
        stage=stage, biomarkers=biomarkers, treatment_lines=lines, progressions=progressions, imaging=imaging, pathology=pathology,
        performance_status=ecog, smoking=smoking, metastatic_sites=[catalog.DX[m].phrase for m in truth.metastases],
        hospice_date=_day_to_date(truth.hospice_day) if np.isfinite(truth.hospice_day) and eids(truth.hospice_tags) else None,
        hospice_event_ids=eids(truth.hospice_tags), death_date=_day_to_date(pop.death[i]) if has_death else None,
        death_event_ids=eids([death_tag]) if death_tag is not None else [],
        record_start_date=_us_to_date(int(record_start_us)), record_end_date=_us_to_date(int(last_us)),
    )


def _prepare_out_dir(out: Path, overwrite: bool) -> None:
    ours = [out / schema.DATA_DIR, out / "metadata", out / GROUND_TRUTH_DIR]
    existing = [p for p in ours if p.exists() and any(p.iterdir())]
    if existing and not overwrite:
        raise SynthOutputError(f"{out}: already holds {', '.join(p.name for p in existing)}; pass --overwrite (overwrite=True) to replace them")
    for p in existing:
        shutil.rmtree(p)
    make_dirs(out)


def generate(config: SynthConfig, out_dir: str | os.PathLike, progress: bool = True, overwrite: bool = False) -> SynthSummary:
    """Generate the dataset described by ``config`` into ``out_dir`` (MEDS data, metadata and ground truth)."""
    from tqdm import tqdm

    t0 = time.perf_counter()
    out = Path(out_dir)
    _prepare_out_dir(out, overwrite)
    n_shards = config.n_shards
    workers = min(config.workers, n_shards)
    results: dict[int, ShardResult] = {}
    bar = tqdm(total=n_shards, desc="synth shards", unit="shard", disable=not progress, file=sys.stderr)
    code_infos = None
    def failed(k: int, exc: BaseException) -> SynthShardError:
        shutil.rmtree(out / _PARTS, ignore_errors=True)
        first = k * config.shard_size + 1
        return SynthShardError(f"{out}: shard {k} (subjects {first}..{min(first + config.shard_size - 1, config.n_subjects)}) failed: {exc}")

    try:
        if workers <= 1:
            for k in range(n_shards):
                try:
                    results[k] = generate_shard(config, k, str(out))
                except Exception as exc:
                    raise failed(k, exc) from exc
                bar.update(1)
        else:
            with ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn")) as pool:
                futures = {pool.submit(generate_shard, config, k, str(out)): k for k in range(n_shards)}
                code_infos = code_metadata()  # the parent's own work, done while the workers generate
                for fut in as_completed(futures):
                    try:
                        res = fut.result()
                    except Exception as exc:
                        for other in futures:
                            other.cancel()
                        raise failed(futures[fut], exc) from exc
                    results[res.shard] = res
                    bar.update(1)
    finally:
        bar.close()

    # ground truth and metadata, in shard order
    parts = out / _PARTS
    with atomic_path(out / ONCOLOGY_FILE) as tmp:
        with open(tmp, "wb") as dst:
            for k in range(n_shards):
                with open(parts / f"oncology-{k:06d}.jsonl", "rb") as src:
                    shutil.copyfileobj(src, dst)
    subjects = pa.concat_tables([pq.read_table(parts / f"subjects-{k:06d}.parquet") for k in range(n_shards)])
    with atomic_path(out / SUBJECTS_FILE) as tmp:
        pq.write_table(subjects, tmp)
    shutil.rmtree(parts)
    write_subject_splits(out, subjects.column("subject_id").to_pylist(), subjects.column("split").to_pylist())
    write_codes(out, code_infos if code_infos is not None else code_metadata())
    write_dataset_metadata(out, dataset_name=config.dataset_name, dataset_version=f"seed-{config.seed}-n-{config.n_subjects}",
                           etl_name="vista.shared.synth", etl_version="0.1.0", meds_version=meds.__version__,
                           license="Synthetic data generated from public knowledge; contains no real patient information.")
    atomic_write_text(out / CONFIG_FILE, config.model_dump_json(indent=2, exclude={"workers"}) + "\n")

    seconds = time.perf_counter() - t0
    total_rows = sum(r.rows for r in results.values())
    cancer_patients, incident, traps = Counter(), Counter(), Counter()
    for r in results.values():
        cancer_patients.update(r.cancer_patients)
        incident.update(r.incident_cases)
        traps.update(r.traps)
    workers_rss: dict[int, float] = {}
    for r in results.values():
        workers_rss[r.pid] = max(workers_rss.get(r.pid, 0.0), r.peak_rss_mb)
    summary = SynthSummary(
        out_dir=str(out), subjects=config.n_subjects, rows=total_rows, notes=sum(r.notes for r in results.values()), shards=n_shards,
        data_files=sum(r.data_files for r in results.values()),
        cancer_patients={k: cancer_patients.get(k, 0) for k in CANCER_KEYS}, incident_cases={k: incident.get(k, 0) for k in CANCER_KEYS},
        rule_outs=sum(r.rule_outs for r in results.values()), traps=dict(sorted(traps.items())), seconds=round(seconds, 3),
        rows_per_second=round(total_rows / seconds, 1) if seconds > 0 else 0.0,
        parent_peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, worker_peak_rss_mb=workers_rss,
    )
    log.info("synthetic dataset: %d subjects, %d rows in %.1f s", summary.subjects, summary.rows, summary.seconds)
    return summary
