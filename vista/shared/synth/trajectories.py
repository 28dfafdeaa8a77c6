"""Background care of every subject, vectorized over the shard: visits, their reasons, and the rows each visit writes
(encounter, E/M, vitals, smoking status, chronic diagnoses and medications, complaints, procedures, labs, notes).

Visit rates are heavy-tailed per subject; a visit is a wellness exam, a chronic follow-up or an acute complaint
(`vista.shared.synth.reasons`). Wellness exams lead to age- and sex-appropriate screening (mammography, colonoscopy,
PSA, Pap/HPV, low-dose CT for eligible smokers) and complaints to follow-up procedures, so imaging and biopsies
occur in non-cases too. Cancer signals are attached to a nearby visit when there is one (cases do not get extra
visits for every symptom) and otherwise get a visit of their own.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import date

import numpy as np

from vista.shared.synth import notes
from vista.shared.synth.catalog import DX, LABS, MEDS, PANELS, PROCEDURES
from vista.shared.synth.conditions import CONDITION_INDEX, CONDITION_LIST
from vista.shared.synth.population import CURRENT, DAYS_PER_YEAR, FORMER, NEVER, Population, to_days
from vista.shared.synth.reasons import REASON_INDEX, REASONS, FollowUp
from vista.shared.synth.rows import US_PER_MINUTE, RowBuffer, days_to_us
from vista.shared.synth.signals import LAB_INDEX, LAB_KEYS, Drifts, SignalEvents, signal_code_ids
from vista.shared.synth.visits import (
    AMB,
    ED,
    IMP,
    K_ACUTE,
    K_CHRONIC,
    K_FOLLOWUP,
    K_ONC,
    K_SCREEN,
    K_SIGNAL,
    K_WELLNESS,
    K_WORKUP,
    PANEL_BIT,
    PANEL_KEYS,
    VisitBuffer,
    Visits,
    time_of_day,
)
from vista.shared.synth.vocabulary import CodeIds

ORDER_FIRST, ORDER_DEFAULT, ORDER_NOTE = 0, 1, 2
N_KINDS = 9

SCREENS = ("mammo", "colonoscopy", "ldct", "dxa")
FOLLOWUPS: tuple[tuple[int, FollowUp], ...] = tuple((ri, f) for ri, r in enumerate(REASONS) for f in r.followups)
IMAGING = {"chest_xray", "ct_chest", "ct_chest_contrast", "ldct", "ct_abd_pelvis", "ct_urogram", "ct_abdomen", "mri_abdomen", "us_abdomen",
           "us_transvaginal", "us_pelvis", "mammo_screen", "mammo_diag", "us_breast", "mri_breast", "pet_ct", "mri_brain", "mri_pelvis", "bone_scan",
           "skeletal_survey"}

# chance that an active documented condition is coded, by visit kind (multiplies the condition's own rate)
CODE_FACTOR = np.array([0.5, 1.0, 1.4, 0.05, 0.05, 0.5, 0.25, 0.3, 0.03])
MED_FACTOR = np.array([0.3, 0.9, 1.2, 0.0, 0.0, 0.3, 0.25, 0.2, 0.0])
VITALS_P = np.array([0.9, 0.95, 0.95, 0.0, 0.05, 0.9, 0.5, 0.6, 0.03])
SMOKING_P = np.array([0.3, 0.8, 0.5, 0.0, 0.0, 0.3, 0.3, 0.3, 0.0])

CONDITION_PANELS: dict[str, tuple[tuple[str, float], ...]] = {
    "diabetes": (("a1c", 0.7), ("bmp", 0.4)), "prediabetes": (("a1c", 0.3),), "hyperlipidemia": (("lipids", 0.35),), "ckd": (("bmp", 0.7),),
    "cirrhosis": (("cmp", 0.7), ("cbc", 0.6), ("inr", 0.4), ("afp", 0.35)), "hypothyroidism": (("tsh", 0.4),),
    "hepatitis_b": (("hepatic", 0.6), ("afp", 0.2)), "hepatitis_c": (("hepatic", 0.6), ("afp", 0.15)), "mgus": (("cbc", 0.5), ("cmp", 0.5)),
    "hypertension": (("bmp", 0.3),), "hiv": (("cbc", 0.5),), "bph": (("psa", 0.3),), "rheumatoid_arthritis": (("crp", 0.5), ("cbc", 0.4)),
    "kidney_transplant": (("bmp", 0.8), ("cbc", 0.6)), "chf": (("bmp", 0.5),), "nafld": (("hepatic", 0.4),), "hemochromatosis": (("ferritin", 0.5),),
    "mds": (("cbc", 0.8),), "ulcerative_colitis": (("cbc", 0.4),), "crohn": (("cbc", 0.4), ("crp", 0.3)),
}
CONDITION_PROCS: dict[str, tuple[tuple[str, float], ...]] = {"cirrhosis": (("us_abdomen", 0.22),), "mgus": (("spep", 0.3),), "copd": (("spirometry", 0.1),)}


@dataclass(slots=True)
class ShardContext:
    """Everything the visit engine needs about the shard."""

    pop: Population
    ids: CodeIds
    texts: list[str]
    note_rate: float
    window_start: float
    window_end: float


# ---------------------------------------------------------------- visits


def _sample_reasons(rng: np.random.Generator, pop: Population, subj: np.ndarray, day: np.ndarray, enc: np.ndarray) -> np.ndarray:
    """Draw a complaint per visit from the setting's weights, redrawing ones that do not fit the subject."""
    reason = np.full(len(subj), -1, dtype=np.int16)
    weights = {AMB: np.array([r.amb for r in REASONS]), ED: np.array([r.ed for r in REASONS]), IMP: np.array([r.imp for r in REASONS])}
    female = pop.female[subj]
    age = (day - pop.birth[subj]) / DAYS_PER_YEAR
    sex_req = np.array([0 if r.sex is None else (1 if r.sex == "F" else 2) for r in REASONS])
    min_age = np.array([r.min_age for r in REASONS])
    max_age = np.array([r.max_age for r in REASONS])
    req = np.array([CONDITION_INDEX[r.requires] if r.requires else -1 for r in REASONS])
    fallback = {AMB: REASON_INDEX["uri"], ED: REASON_INDEX["abdominal_pain"], IMP: REASON_INDEX["pneumonia"]}
    for setting, w in weights.items():
        sel = np.flatnonzero(enc == setting)
        cdf = np.cumsum(w / w.sum())
        pending = sel
        for _ in range(6):
            if len(pending) == 0:
                break
            r = np.minimum(np.searchsorted(cdf, rng.random(len(pending)), side="right"), len(REASONS) - 1)
            ok = (sex_req[r] == 0) | ((sex_req[r] == 1) & female[pending]) | ((sex_req[r] == 2) & ~female[pending])
            ok &= (age[pending] >= min_age[r]) & (age[pending] <= max_age[r])
            need = req[r]
            has_req = np.ones(len(pending), bool)
            m = need >= 0
            if m.any():
                has_req[m] = pop.onset[subj[pending[m]], need[m]] <= day[pending[m]]
            ok &= has_req
            reason[pending[ok]] = r[ok]
            pending = pending[~ok]
        reason[pending] = fallback[setting]
    return reason


def add_background_visits(ctx: ShardContext, rng: np.random.Generator, vb: VisitBuffer) -> np.ndarray:
    """Background visits of every subject inside its record; returns their visit ids."""
    pop = ctx.pop
    n = pop.n
    start, end = pop.record_start, pop.record_end
    years = np.maximum(end - start, 0.0) / DAYS_PER_YEAR
    counts = 1 + rng.poisson(pop.visit_rate * years)
    counts = np.minimum(counts, 400)
    subj = np.repeat(np.arange(n, dtype=np.int32), counts)
    first = np.zeros(len(subj), dtype=bool)
    first[np.concatenate([[0], np.cumsum(counts)[:-1]])] = True
    day = start[subj] + rng.random(len(subj)) * (end - start)[subj]
    day[first] = start[subj[first]]
    # some visits bring a follow-up a few weeks later (illness episodes cluster)
    fu = (~first) & (rng.random(len(subj)) < 0.1)
    fu_day = day[fu] + rng.uniform(7, 30, int(fu.sum()))
    ok = fu_day < end[subj[fu]]
    subj = np.concatenate([subj, subj[fu][ok]])
    day = np.concatenate([day, fu_day[ok]])
    first = np.concatenate([first, np.zeros(int(ok.sum()), bool)])
    age = (day - pop.birth[subj]) / DAYS_PER_YEAR
    morbid = pop.documented[subj].sum(axis=1)
    u = rng.random(len(subj))
    p_imp = 0.02 + 0.0006 * np.maximum(age - 40, 0) + 0.004 * morbid
    p_ed = 0.08 + 0.004 * morbid
    enc = np.where(u < p_imp, IMP, np.where(u < p_imp + p_ed, ED, AMB)).astype(np.int8)
    enc[first] = AMB
    kind = np.full(len(subj), K_ACUTE, dtype=np.int8)
    amb = enc == AMB
    u = rng.random(len(subj))
    has_chronic = morbid > 0
    kind[amb & (u < 0.2)] = K_WELLNESS
    kind[amb & (u >= 0.2) & (u < np.where(has_chronic, 0.62, 0.27))] = K_CHRONIC
    day = np.floor(day) + time_of_day(rng, enc)
    reason = np.where(kind == K_ACUTE, _sample_reasons(rng, pop, subj, day, enc), -1).astype(np.int16)
    note_p = np.where(enc == AMB, ctx.note_rate, np.where(enc == ED, 0.4, 0.8))
    note = rng.random(len(subj)) < note_p
    return vb.add(subj, day, enc, kind, reason, 0, False, note)


def place_signals(ctx: ShardContext, rng: np.random.Generator, vb: VisitBuffer, bg: Visits, bg_ids: np.ndarray,
                  signals: SignalEvents) -> tuple[np.ndarray, np.ndarray]:
    """Attach each signal code to a background visit within 21 days, else give it a new visit.

    Returns (visit id, code id) pairs of the signal diagnosis rows.
    """
    codes = signal_code_ids(signals, ctx.ids)
    if len(codes) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int32)
    pop = ctx.pop
    inside = (signals.day >= pop.record_start[signals.subject]) & (signals.day < pop.record_end[signals.subject])
    s_subj, s_day, s_code, s_dx = signals.subject[inside], signals.day[inside], codes[inside], signals.dx[inside]
    attachable = np.isin(bg.kind, (K_ACUTE, K_WELLNESS, K_CHRONIC))
    key = bg.subject.astype(np.float64) * 1e6 + bg.day
    key = np.where(attachable, key, np.inf)
    order = np.argsort(key, kind="stable")
    skey = key[order]
    q = s_subj.astype(np.float64) * 1e6 + s_day
    pos = np.searchsorted(skey, q)
    best = np.full(len(q), -1, dtype=np.int64)
    best_gap = np.full(len(q), np.inf)
    for cand in (pos - 1, pos):
        valid = (cand >= 0) & (cand < len(skey))
        c = np.where(valid, cand, 0)
        gap = np.abs(skey[c] - q)
        better = valid & (gap < best_gap) & (gap <= 21.0)
        best = np.where(better, c, best)
        best_gap = np.where(better, gap, best_gap)
    found = best >= 0
    visit_ids = np.empty(len(q), dtype=np.int64)
    visit_ids[found] = bg_ids[order[best[found]]]
    new = ~found
    if new.any():
        dx_keys = np.array(signals.dx_keys, dtype=object)
        reason = np.array([REASON_INDEX.get(k, -1) for k in dx_keys[s_dx[new]]], dtype=np.int16)
        nday = np.floor(s_day[new]) + time_of_day(rng, np.zeros(int(new.sum()), np.int8))
        note = rng.random(int(new.sum())) < ctx.note_rate
        visit_ids[new] = vb.add(s_subj[new], nday, AMB, K_SIGNAL, reason, 0, False, note)
    return visit_ids, s_code


def add_derived_visits(ctx: ShardContext, rng: np.random.Generator, vb: VisitBuffer, v: Visits) -> None:
    """Screening visits after wellness exams and follow-up procedures after complaints (mostly benign)."""
    pop = ctx.pop
    subj, day = v.subject, v.day
    age = (day - pop.birth[subj]) / DAYS_PER_YEAR
    female = pop.female[subj]
    well = v.kind == K_WELLNESS
    end = pop.record_end[subj]
    ever = pop.smoking[subj] != NEVER
    py = np.where(ever, (np.minimum(day, pop.smoking_quit[subj]) - pop.smoking_start[subj]) / DAYS_PER_YEAR * pop.packs_per_day[subj], 0.0)
    quit_recent = (pop.smoking[subj] == CURRENT) | (day - pop.smoking_quit[subj] < 15 * DAYS_PER_YEAR)
    ldct_era = day >= to_days(date(2015, 3, 1))
    rules = (
        (0, well & female & (age >= 40) & (age <= 75), 0.55, (1, 30)),
        (1, well & (age >= 50) & (age <= 75), 0.06, (7, 60)),
        (2, well & ever & (age >= 50) & (age <= 80) & (py >= 20) & quit_recent & ldct_era, 0.2, (7, 45)),
        (3, well & female & (age >= 65), 0.08, (7, 60)),
    )
    for screen, mask, p, (lo, hi) in rules:
        sel = np.flatnonzero(mask & (rng.random(len(subj)) < p))
        nday = np.floor(day[sel] + rng.uniform(lo, hi, len(sel)))
        ok = nday < np.floor(end[sel])
        sel, nday = sel[ok], nday[ok]
        vb.add(subj[sel], nday + time_of_day(rng, np.zeros(len(sel), np.int8)), AMB, K_SCREEN, screen, 0, False, False)
    # follow-up procedures of complaints
    has_reason = (v.reason >= 0) & np.isin(v.kind, (K_ACUTE, K_SIGNAL))
    for fi, (ri, f) in enumerate(FOLLOWUPS):
        sel = np.flatnonzero(has_reason & (v.reason == ri))
        sel = sel[rng.random(len(sel)) < f.p]
        nday = np.floor(day[sel] + rng.uniform(f.lo, f.hi, len(sel)))
        ok = nday < np.floor(end[sel])
        sel, nday = sel[ok], nday[ok]
        vb.add(subj[sel], nday + time_of_day(rng, np.zeros(len(sel), np.int8)), AMB, K_FOLLOWUP, fi, 0, False, False)


# ---------------------------------------------------------------- rows


def _smoking_status(pop: Population, subj: np.ndarray, day: np.ndarray) -> np.ndarray:
    s = pop.smoking[subj].astype(np.int8)
    s = np.where((s == FORMER) & (day < pop.smoking_quit[subj]), CURRENT, s)
    s = np.where((s != NEVER) & (day < pop.smoking_start[subj]), NEVER, s)
    return s


class RowEmitter:
    """Helpers that turn (visit index, code id) selections into row chunks with the right times."""

    def __init__(self, rb: RowBuffer, v: Visits, visit_time: np.ndarray):
        self.rb = rb
        self.v = v
        self.t = visit_time

    def emit(self, vis: np.ndarray, code, offset_min: int, numeric=None, text=None, order: int = ORDER_DEFAULT) -> None:
        if len(vis) == 0:
            return
        self.rb.add(self.v.subject[vis], self.t[vis] + offset_min * US_PER_MINUTE, code, numeric, text, order, None, vis)


def generate_visit_rows(ctx: ShardContext, rng: np.random.Generator, v: Visits, rb: RowBuffer, drifts: Drifts,
                        signal_visits: np.ndarray, signal_codes: np.ndarray) -> None:
    """All generic rows of all visits (course visits included) and the background notes."""
    pop, ids = ctx.pop, ctx.ids
    nv = len(v)
    t = days_to_us(v.day)
    em = RowEmitter(rb, v, t)
    subj, day, enc, kind = v.subject, v.day, v.enc, v.kind
    age = (day - pop.birth[subj]) / DAYS_PER_YEAR
    female = pop.female[subj]
    u = lambda: rng.random(nv)  # noqa: E731

    # encounter and E/M
    em.emit(np.arange(nv), np.array(ids.encounter)[enc], 0, order=ORDER_FIRST)
    office = np.isin(kind, (K_ACUTE, K_CHRONIC, K_SIGNAL, K_WORKUP))
    sel = np.flatnonzero(office & (enc == AMB))
    em.emit(sel, np.where(rng.random(len(sel)) < 0.6, ids.proc["office_low"], ids.proc["office_mod"]), 1)
    sel = np.flatnonzero(np.isin(kind, (K_ACUTE, K_SIGNAL, K_WORKUP)) & (enc == ED))
    em.emit(sel, np.array([ids.proc["ed_mod"], ids.proc["ed_high"], ids.proc["ed_critical"]])[rng.integers(0, 3, len(sel))], 1)
    sel = np.flatnonzero(enc == IMP)
    em.emit(sel, ids.proc["hospital_initial"], 1)
    em.emit(sel, ids.proc["hospital_discharge"], 40)
    sel = np.flatnonzero(kind == K_WELLNESS)
    prev = np.where(age[sel] >= 65, ids.proc["preventive_65"], np.where(age[sel] >= 40, ids.proc["preventive_40"], ids.proc["preventive_18"]))
    em.emit(sel, prev, 1)
    em.emit(sel, ids.dx["wellness"], 15)

    panels = v.panels.copy()

    # vitals (values come from the lab engine below)
    vit = u() < VITALS_P[kind]
    vitals_rows: list[tuple[np.ndarray, str]] = []
    for key in ("sbp", "dbp", "weight", "bmi"):
        vitals_rows.append((np.flatnonzero(vit), key))
    vitals_rows.append((np.flatnonzero(vit & (u() < 0.6)), "hr"))
    acute_setting = vit & (enc != AMB)
    vitals_rows.append((np.flatnonzero(acute_setting), "spo2"))
    vitals_rows.append((np.flatnonzero(acute_setting), "temp"))
    vitals_rows.append((np.flatnonzero(vit & (u() < 0.08)), "height"))

    # smoking status and tobacco codes
    status = _smoking_status(pop, subj, day)
    sel = np.flatnonzero(pop.smoking_documented[subj] & (u() < SMOKING_P[kind]) & (enc != ED))
    st = status[sel]
    misread = rng.random(len(sel)) < 0.03
    occasional = (pop.subject_id[subj[sel]] % 7) == 0
    obs = np.where(st == NEVER, ids.obs["never_smoker"], np.where(st == FORMER, np.where(misread, ids.obs["never_smoker"], ids.obs["former_smoker"]),
                                                                      np.where(occasional, ids.obs["current_some_day_smoker"], ids.obs["current_daily_smoker"])))
    em.emit(sel, obs, 5)
    ever_sel = sel[(st != NEVER) & (rng.random(len(sel)) < 0.15)]
    if len(ever_sel):
        py = (np.minimum(day[ever_sel], pop.smoking_quit[subj[ever_sel]]) - pop.smoking_start[subj[ever_sel]]) / DAYS_PER_YEAR * pop.packs_per_day[subj[ever_sel]]
        em.emit(ever_sel, ids.obs["pack_years"], 5, numeric=np.round(np.maximum(py, 0.5), 1))
    coded_dependence = (pop.subject_id % 100) < 55
    sel = np.flatnonzero((status == CURRENT) & coded_dependence[subj] & (u() < 0.35 * CODE_FACTOR[kind]))
    em.emit(sel, ids.dx["nicotine_dependence"], 15)
    sel2 = sel[rng.random(len(sel)) < 0.12]
    em.emit(sel2, ids.dx["tobacco_counseling"], 16)
    em.emit(sel2, np.where(rng.random(len(sel2)) < 0.5, ids.med["varenicline"], ids.med["nicotine"]), 20)
    coded_history = (pop.subject_id % 100) < 40
    sel = np.flatnonzero((status == FORMER) & coded_history[subj] & (u() < 0.3 * CODE_FACTOR[kind]))
    em.emit(sel, ids.dx["history_tobacco"], 15)

    # chronic conditions and their medications
    documented_subjects = {j: np.flatnonzero(pop.documented[:, j]) for j in range(len(CONDITION_LIST))}
    visits_of = np.argsort(subj, kind="stable")
    first_visit = np.searchsorted(subj[visits_of], np.arange(pop.n + 1))
    for j, spec in enumerate(CONDITION_LIST):
        who = documented_subjects[j]
        if len(who) == 0:
            continue
        # visits of the subjects who have it documented, then those after its onset
        cand = np.concatenate([visits_of[first_visit[s]:first_visit[s + 1]] for s in who]) if len(who) < 64 else \
            np.flatnonzero(pop.documented[subj, j])
        active = cand[pop.onset[subj[cand], j] <= day[cand]]
        if len(active) == 0:
            continue
        k = kind[active]
        p = np.minimum(spec.p_per_visit * CODE_FACTOR[k], 0.95)
        em.emit(active[rng.random(len(active)) < p], ids.dx[spec.dx], 15)
        if spec.meds:
            med = pop.medication[subj[active], j]
            on = (med >= 0) & (day[active] >= pop.onset[subj[active], j] + 14) & (rng.random(len(active)) < 0.45 * MED_FACTOR[k])
            med_ids = np.array([ids.med[m] for m in spec.meds])
            em.emit(active[on], med_ids[med[on]], 20)
        chronic_visit = active[(k == K_CHRONIC) | ((k == K_WELLNESS) & (rng.random(len(active)) < 0.5))]
        for panel, p in CONDITION_PANELS.get(spec.key, ()):
            panels[chronic_visit[rng.random(len(chronic_visit)) < 0.75 * p]] |= PANEL_BIT[panel]
        for proc, p in CONDITION_PROCS.get(spec.key, ()):
            hit = chronic_visit[rng.random(len(chronic_visit)) < p]
            em.emit(hit, ids.proc[proc], 25)
            if proc == "us_abdomen":
                _imaging_notes(ctx, rng, em, hit, proc, "cirrhosis_surveillance")

    # complaints: diagnosis, same-visit procedures, medications, panels
    has_reason = (v.reason >= 0) & np.isin(kind, (K_ACUTE, K_SIGNAL))
    for ri, r in enumerate(REASONS):
        sel = np.flatnonzero(has_reason & (v.reason == ri))
        if len(sel) == 0:
            continue
        em.emit(sel, ids.dx[r.dx], 15)
        for proc, p in r.procedures:
            hit = sel[rng.random(len(sel)) < p]
            em.emit(hit, ids.proc[proc], 25)
            if proc in IMAGING and r.note:
                _imaging_notes(ctx, rng, em, hit, proc, r.dx)
        for med, p in r.meds:
            em.emit(sel[rng.random(len(sel)) < p], ids.med[med], 20)
        for panel, p in r.panels:
            hit = sel[rng.random(len(sel)) < p]
            panels[hit] |= PANEL_BIT[panel]
    em.emit(signal_visits, signal_codes, 15)

    # wellness content: routine labs and screening done in the office
    well = np.flatnonzero(kind == K_WELLNESS)
    for panel, p in (("lipids", 0.35), ("cmp", 0.25), ("bmp", 0.1), ("cbc", 0.3), ("a1c", 0.12), ("tsh", 0.1)):
        hit = well[rng.random(len(well)) < p]
        panels[hit] |= PANEL_BIT[panel]
    psa = well[(~female[well]) & (age[well] >= 50) & (age[well] <= 70) & (rng.random(len(well)) < 0.4)]
    panels[psa] |= PANEL_BIT["psa"]
    em.emit(psa, ids.proc["psa_screen"], 25)
    em.emit(psa, ids.dx["screen_prostate"], 15)
    pap = well[female[well] & (age[well] >= 21) & (age[well] <= 65) & (rng.random(len(well)) < 0.3)]
    em.emit(pap, ids.proc["pap"], 25)
    em.emit(pap, ids.dx["screen_cervix"], 15)
    em.emit(pap[age[pap] >= 30], ids.proc["hpv_test"], 26)
    u_pap = rng.random(len(pap))
    em.emit(pap[u_pap < 0.04], ids.dx["pap_ascus"], 16)
    em.emit(pap[(u_pap >= 0.04) & (u_pap < 0.05)], ids.dx["pap_hsil"], 16)
    fit = well[(age[well] >= 50) & (age[well] <= 75) & (rng.random(len(well)) < 0.1)]
    em.emit(fit, ids.proc["fit"], 25)
    em.emit(fit, ids.dx["screen_colon"], 15)
    flu = well[rng.random(len(well)) < 0.35]
    em.emit(flu, ids.proc["flu_shot"], 25)
    em.emit(flu, ids.dx["flu_vaccine"], 15)

    # emergency and inpatient labs
    panels[(enc == ED) & (u() < 0.7)] |= PANEL_BIT["cbc"]
    panels[(enc == ED) & (u() < 0.55)] |= PANEL_BIT["bmp"]
    panels[(enc == IMP) & (kind != K_ONC)] |= PANEL_BIT["cbc"] | PANEL_BIT["bmp"]
    panels[(enc == IMP) & (kind != K_ONC) & (u() < 0.3)] |= PANEL_BIT["hepatic"]
    panels[(~female) & (panels & PANEL_BIT["ca125"] > 0)] &= ~PANEL_BIT["ca125"]
    panels[female & (panels & PANEL_BIT["psa"] > 0)] &= ~PANEL_BIT["psa"]

    _screening_rows(ctx, rng, em, v)
    _followup_rows(ctx, rng, em, v)
    lab_vis, lab_idx, values = _lab_rows(ctx, rng, v, panels, vitals_rows, drifts)
    lab_codes = np.array([ids.lab[k] for k in LAB_KEYS], dtype=np.int32)
    is_vital = np.isin(lab_idx, [LAB_INDEX[k] for k in ("sbp", "dbp", "hr", "weight", "bmi", "spo2", "temp", "height")])
    rb.add(subj[lab_vis], t[lab_vis] + np.where(is_vital, 5, 45) * US_PER_MINUTE, lab_codes[lab_idx], values, None, ORDER_DEFAULT, None, lab_vis)
    _lab_triggered_codes(ctx, rng, em, v, lab_vis, lab_idx, values)
    _progress_notes(ctx, rng, rb, v, t)


def _imaging_notes(ctx: ShardContext, rng: np.random.Generator, em: RowEmitter, vis: np.ndarray, proc: str, reason: str | None,
                   extra_fn=None, offset: int = 120) -> None:
    """Radiology reports for background imaging rows (one Python call per report)."""
    if len(vis) == 0:
        return
    pop = ctx.pop
    r = random.Random(int(rng.integers(0, 2**63 - 1)))
    texts = ctx.texts
    text_idx = np.empty(len(vis), dtype=np.int32)
    exam = PROCEDURES[proc].phrase
    exam = exam[0].upper() + exam[1:]
    cirr = CONDITION_INDEX["cirrhosis"]
    dense = CONDITION_INDEX["dense_breast"]
    for k, vi in enumerate(vis.tolist()):
        s = int(em.v.subject[vi])
        extra = {"cirrhosis": pop.onset[s, cirr] <= em.v.day[vi], "dense": pop.onset[s, dense] <= em.v.day[vi]}
        if extra_fn is not None:
            extra.update(extra_fn(k))
        reason_key = reason if reason in DX else None
        findings, impression = notes.background_radiology(r, proc, reason_key, extra)
        indication = DX[reason_key].phrase if reason_key else ("screening" if proc in ("mammo_screen", "ldct") else "surveillance")
        texts.append(notes.radiology_report(r, str(np.datetime64(int(em.v.day[vi]), "D")), exam, indication, findings, impression))
        text_idx[k] = len(texts) - 1
    em.emit(vis, ctx.ids.note["RADIOLOGY"], offset, text=text_idx, order=ORDER_NOTE)


def _pathology_notes(ctx: ShardContext, rng: np.random.Generator, em: RowEmitter, vis: np.ndarray, proc: str) -> None:
    if len(vis) == 0:
        return
    r = random.Random(int(rng.integers(0, 2**63 - 1)))
    text_idx = np.empty(len(vis), dtype=np.int32)
    for k, vi in enumerate(vis.tolist()):
        specimen, diagnosis, details = notes.background_pathology(r, proc)
        ctx.texts.append(notes.pathology_report(r, str(np.datetime64(int(em.v.day[vi]), "D")), specimen, diagnosis, details))
        text_idx[k] = len(ctx.texts) - 1
    em.emit(vis, ctx.ids.note["PATHOLOGY"], 240, text=text_idx, order=ORDER_NOTE)


def _screening_rows(ctx: ShardContext, rng: np.random.Generator, em: RowEmitter, v: Visits) -> None:
    ids = ctx.ids
    scr = v.kind == K_SCREEN
    mam = np.flatnonzero(scr & (v.reason == 0))
    em.emit(mam, ids.proc["mammo_screen"], 25)
    em.emit(mam, ids.dx["screen_breast"], 15)
    callback = rng.random(len(mam)) < 0.08  # BI-RADS 0 recalls, nearly all benign on work-up
    em.emit(mam[callback], ids.dx["abnormal_mammogram"], 16)
    _imaging_notes(ctx, rng, em, mam, "mammo_screen", None, extra_fn=lambda k: {"callback": bool(callback[k])})
    col = np.flatnonzero(scr & (v.reason == 1))
    em.emit(col, ids.proc["screening_colonoscopy"], 25)
    em.emit(col, ids.dx["screen_colon"], 15)
    polyp = col[rng.random(len(col)) < 0.35]
    em.emit(polyp, ids.proc["colonoscopy_polypectomy"], 26)
    em.emit(polyp, ids.proc["surgical_path"], 27)
    em.emit(polyp, ids.dx["colon_polyp"], 16)
    _pathology_notes(ctx, rng, em, polyp, "colonoscopy_polypectomy")
    ldct = np.flatnonzero(scr & (v.reason == 2))
    em.emit(ldct, ids.proc["ldct"], 25)
    em.emit(ldct, ids.dx["screen_lung"], 15)
    nodule = rng.random(len(ldct)) < 0.08
    em.emit(ldct[nodule], ids.dx["lung_nodule"], 16)
    flags = nodule.copy()
    _imaging_notes(ctx, rng, em, ldct, "ldct", None, extra_fn=lambda k: {"nodule": bool(flags[k])})
    dxa = np.flatnonzero(scr & (v.reason == 3))
    em.emit(dxa, ids.proc["dxa"], 25)


def _followup_rows(ctx: ShardContext, rng: np.random.Generator, em: RowEmitter, v: Visits) -> None:
    ids = ctx.ids
    fu = v.kind == K_FOLLOWUP
    for fi, (ri, f) in enumerate(FOLLOWUPS):
        sel = np.flatnonzero(fu & (v.reason == fi))
        if len(sel) == 0:
            continue
        em.emit(sel, ids.dx[REASONS[ri].dx], 15)
        for p in f.procedures:
            em.emit(sel, ids.proc[p], 25)
        if f.note == "RADIOLOGY":
            _imaging_notes(ctx, rng, em, sel, f.procedures[0], REASONS[ri].dx,
                           extra_fn=(lambda k: {"followup": True}) if REASONS[ri].dx == "lung_nodule" else None)
        elif f.note == "PATHOLOGY":
            if f.procedures[0] == "colonoscopy":
                sel = sel[rng.random(len(sel)) < 0.4]
                em.emit(sel, ids.proc["colonoscopy_polypectomy"], 26)
                em.emit(sel, ids.proc["surgical_path"], 27)
                em.emit(sel, ids.dx["colon_polyp"], 16)
            _pathology_notes(ctx, rng, em, sel, f.procedures[0])


# ---------------------------------------------------------------- labs


def _baselines(pop: Population, seed_rng: np.random.Generator) -> np.ndarray:
    """Per (subject, lab) baseline on the natural or log scale."""
    n = pop.n
    out = np.empty((n, len(LAB_KEYS)))
    z = seed_rng.standard_normal((n, len(LAB_KEYS)))
    for j, key in enumerate(LAB_KEYS):
        lab = LABS[key]
        mean = np.where(pop.female, lab.mean_f, lab.mean_m)
        if lab.log:
            out[:, j] = np.log(mean) + lab.sd_between * z[:, j]
        else:
            out[:, j] = mean + lab.sd_between * z[:, j]
    out[:, LAB_INDEX["bmi"]] = pop.bmi
    out[:, LAB_INDEX["height"]] = pop.height
    return out


_EFFECTS_BY_LAB: dict[int, list[tuple[int, float]]] = {}
for _c in CONDITION_LIST:
    for _lab, _shift in _c.labs:
        _EFFECTS_BY_LAB.setdefault(LAB_INDEX[_lab], []).append((CONDITION_INDEX[_c.key], _shift))
_CHEMO_EFFECT = {LAB_INDEX["hgb"]: -1.1, LAB_INDEX["plt"]: -45.0, LAB_INDEX["wbc"]: -0.3, LAB_INDEX["neut"]: -0.45}
_PANEL_LABS = {pk: sum(1 << LAB_INDEX[lab] for lab in PANELS[pk]) for pk in PANEL_KEYS}
_LAB_ORDER = [j for j in range(len(LAB_KEYS)) if j != LAB_INDEX["weight"]]
_LAB_ORDER.insert(_LAB_ORDER.index(LAB_INDEX["bmi"]) + 1, LAB_INDEX["weight"])


def _lab_rows(ctx: ShardContext, rng: np.random.Generator, v: Visits, panels: np.ndarray, vitals_rows, drifts: Drifts):
    """Expand ordered panels and vitals into (visit, lab, value) rows, one lab at a time."""
    pop = ctx.pop
    nv = len(v)
    lab_mask = np.zeros(nv, dtype=np.int64)
    for pk in PANEL_KEYS:
        hit = (panels & PANEL_BIT[pk]) != 0
        lab_mask[hit] |= _PANEL_LABS[pk]
    for sel, key in vitals_rows:
        lab_mask[sel] |= 1 << LAB_INDEX[key]
    base = _baselines(pop, np.random.default_rng(rng.integers(0, 2**63 - 1)))
    by_visit: dict[int, np.ndarray] = {}
    out_vis, out_lab, out_val = [], [], []
    for j in _LAB_ORDER:
        key = LAB_KEYS[j]
        sel = np.flatnonzero(lab_mask & (1 << j))
        if len(sel) == 0:
            continue
        lab = LABS[key]
        s = v.subject[sel]
        day = v.day[sel]
        if j == LAB_INDEX["hct"]:
            hgb = by_visit.get(LAB_INDEX["hgb"])
            x = (hgb[sel] if hgb is not None else np.full(len(sel), 13.5)) * 3.0 + rng.normal(0, 0.7, len(sel))
        elif j == LAB_INDEX["weight"]:
            bmi = by_visit.get(LAB_INDEX["bmi"])
            h = pop.height[s] / 100.0
            x = (bmi[sel] if bmi is not None else pop.bmi[s]) * h * h + rng.normal(0, 0.4, len(sel))
        else:
            x = base[s, j]
            for cj, shift in _EFFECTS_BY_LAB.get(j, ()):
                x = x + np.where(pop.onset[s, cj] <= day, shift, 0.0)
            if key == "psa":
                x = x + 0.03 * np.maximum((day - pop.birth[s]) / DAYS_PER_YEAR - 50, 0)
            mag = drifts.magnitude[s, j]
            has = mag != 0
            if has.any():
                st, en = drifts.start[s, j], drifts.end[s, j]
                with np.errstate(invalid="ignore"):
                    frac = np.clip((day - st) / np.maximum(en - st, 1.0), 0.0, 1.0)
                    after = np.clip(1.0 - (day - en) / 240.0, 0.0, 1.0)
                x = np.where(has, x + mag * np.where(day <= en, frac, after), x)
            if j in _CHEMO_EFFECT:
                x = np.where(v.chemo[sel], x + _CHEMO_EFFECT[j], x)
            x = x + lab.sd_within * rng.standard_normal(len(sel))
            if lab.log:
                x = np.exp(np.minimum(x, 12.0))
        x = np.clip(x, lab.low, lab.high)
        scale = 10.0 ** lab.decimals
        x = np.round(x * scale) / scale
        if j in (LAB_INDEX["hgb"], LAB_INDEX["bmi"]):
            dense = np.full(nv, np.nan)
            dense[sel] = x
            by_visit[j] = dense
        out_vis.append(sel)
        out_lab.append(np.full(len(sel), j, np.int16))
        out_val.append(x.astype(np.float32))
    if not out_vis:
        return np.zeros(0, np.int64), np.zeros(0, np.int16), np.zeros(0, np.float32)
    return np.concatenate(out_vis), np.concatenate(out_lab), np.concatenate(out_val)


_TRIGGERS = (
    ("hgb", "<", 10.8, "anemia", 0.3), ("plt", "<", 120.0, "thrombocytopenia", 0.35), ("wbc", ">", 12.5, "leukocytosis", 0.3),
    ("lymph", ">", 5.5, "lymphocytosis", 0.3), ("neut", "<", 1.2, "neutropenia", 0.3), ("calcium", ">", 10.8, "hypercalcemia", 0.4),
    ("glucose", ">", 200.0, "hyperglycemia", 0.25), ("creatinine", ">", 2.0, "aki", 0.15), ("alt", ">", 90.0, "elevated_liver_enzymes", 0.35),
    ("afp", ">", 20.0, "abnormal_afp", 0.5), ("psa", ">", 4.0, "elevated_psa", 0.45), ("bilirubin", ">", 2.5, "jaundice", 0.3),
)


def _lab_triggered_codes(ctx: ShardContext, rng: np.random.Generator, em: RowEmitter, v: Visits, vis: np.ndarray, lab: np.ndarray,
                         values: np.ndarray) -> None:
    """Abnormal results get their diagnosis code at the same visit part of the time (codes agree with values)."""
    ids = ctx.ids
    for key, op, thr, dx, p in _TRIGGERS:
        m = lab == LAB_INDEX[key]
        hit = m & ((values < thr) if op == "<" else (values > thr))
        sel = vis[hit]
        sel = sel[rng.random(len(sel)) < p]
        if key == "hgb" and len(sel):
            mcv_rows = lab == LAB_INDEX["mcv"]
            low_mcv = set(vis[mcv_rows & (values < 80.0)].tolist())
            micro = np.array([s in low_mcv for s in sel.tolist()], dtype=bool)
            em.emit(sel[micro], ids.dx["iron_deficiency_anemia"], 15)
            sel = sel[~micro]
        if key == "neut":
            chemo = v.chemo[sel]
            em.emit(sel[chemo], ids.dx["chemo_neutropenia"], 15)
            sel = sel[~chemo]
        em.emit(sel, ids.dx[dx], 15)


# ---------------------------------------------------------------- progress notes

_NOTE_VITALS = ("sbp", "dbp", "hr", "weight", "bmi", "spo2", "temp")
CAT_NONE, CAT_DX, CAT_MED, CAT_PROC, CAT_LAB, CAT_VITAL, CAT_SMOKING = range(7)


@dataclass(frozen=True)
class _CodeClasses:
    """Per vocabulary id: what a progress note does with a row of that code."""

    category: np.ndarray
    phrase: np.ndarray
    lab: np.ndarray
    ref_low: np.ndarray
    ref_high: np.ndarray


_CLASSES: _CodeClasses | None = None


def _code_classes(ids: CodeIds) -> _CodeClasses:
    global _CLASSES
    if _CLASSES is None:
        from vista.shared.synth.vocabulary import vocabulary

        n = len(vocabulary())
        cat = np.zeros(n, np.int8)
        phrase = np.full(n, "", dtype=object)
        lab = np.full(n, -1, np.int16)
        lo = np.full(n, -np.inf)
        hi = np.full(n, np.inf)
        for k, d in DX.items():
            if k != "wellness":
                cat[ids.dx[k]] = CAT_DX
                phrase[ids.dx[k]] = d.phrase
        for k, m in MEDS.items():
            cat[ids.med[k]] = CAT_MED
            phrase[ids.med[k]] = m.name
        for k, p in PROCEDURES.items():
            if not k.startswith(("office", "preventive", "ed_", "hospital")):
                cat[ids.proc[k]] = CAT_PROC
                phrase[ids.proc[k]] = p.phrase
        for k, spec in LABS.items():
            c = ids.lab[k]
            cat[c] = CAT_VITAL if k in _NOTE_VITALS else (CAT_LAB if k not in ("height", "ecog") else CAT_NONE)
            phrase[c] = spec.phrase
            lab[c] = LAB_INDEX[k]
            lo[c] = spec.ref_low if spec.ref_low is not None else -np.inf
            hi[c] = spec.ref_high if spec.ref_high is not None else np.inf
        for k in ("never_smoker", "former_smoker", "current_daily_smoker", "current_some_day_smoker"):
            cat[ids.obs[k]] = CAT_SMOKING
        _CLASSES = _CodeClasses(cat, phrase, lab, lo, hi)
    return _CLASSES


def _progress_notes(ctx: ShardContext, rng: np.random.Generator, rb: RowBuffer, v: Visits, t: np.ndarray) -> None:
    """One progress note per note-flagged background visit, written from that visit's rows."""
    noted = np.flatnonzero(v.note & np.isin(v.kind, (K_ACUTE, K_WELLNESS, K_CHRONIC, K_SIGNAL)))
    if len(noted) == 0:
        return
    pop = ctx.pop
    cls = _code_classes(ctx.ids)
    want = np.zeros(len(v), dtype=bool)
    want[noted] = True
    r_vis, r_code, r_num = rb.select_visits(want)
    cat = cls.category[r_code]
    keep = cat != CAT_NONE
    r_vis, r_code, r_num, cat = r_vis[keep], r_code[keep], r_num[keep], cat[keep]
    order = np.argsort(r_vis, kind="stable")
    r_vis, r_code, r_num, cat = r_vis[order], r_code[order], r_num[order], cat[order]
    nv = len(v)

    # vitals as dense per-visit values
    vit = {}
    for key in _NOTE_VITALS:
        dense = np.full(nv, np.nan)
        m = r_code == ctx.ids.lab[key]
        dense[r_vis[m]] = r_num[m]
        vit[key] = dense
    # labs worth mentioning: abnormal ones and a few normal ones, formatted once
    is_lab = cat == CAT_LAB
    low = is_lab & (r_num < cls.ref_low[r_code])
    high = is_lab & (r_num > cls.ref_high[r_code])
    mention = low | high | (is_lab & (rng.random(len(r_code)) < 0.15))
    text_of_row = np.full(len(r_code), "", dtype=object)
    for idx in np.flatnonzero(mention).tolist():
        lab = LABS[LAB_KEYS[int(cls.lab[r_code[idx]])]]
        flag = " (low)" if low[idx] else (" (high)" if high[idx] else "")
        text_of_row[idx] = f"{lab.phrase} {float(r_num[idx]):g} {lab.unit}{flag}"
    phrase_of_row = cls.phrase[r_code]
    starts = np.searchsorted(r_vis, noted, side="left")
    ends = np.searchsorted(r_vis, noted, side="right")

    r = random.Random(int(rng.integers(0, 2**63 - 1)))
    text_idx = np.empty(len(noted), dtype=np.int32)
    kinds = {K_ACUTE: "acute", K_WELLNESS: "wellness", K_CHRONIC: "chronic", K_SIGNAL: "acute"}
    settings = ("AMB", "ED", "IMP")
    status = _smoking_status(pop, v.subject[noted], v.day[noted])
    reason_dx = {ri: DX[x.dx].phrase for ri, x in enumerate(REASONS)}
    cat_l = cat.tolist()
    phr_l = phrase_of_row.tolist()
    txt_l = text_of_row.tolist()
    ment_l = mention.tolist()
    subj_l = v.subject[noted].tolist()
    day_l = v.day[noted].tolist()
    enc_l = v.enc[noted].tolist()
    kind_l = v.kind[noted].tolist()
    reason_l = v.reason[noted].tolist()
    vit_l = {k: vit[k][noted].tolist() for k in _NOTE_VITALS}
    for k in range(len(noted)):
        s = subj_l[k]
        problems: list[str] = []
        meds: list[str] = []
        procs: list[str] = []
        labs: list[str] = []
        smoking_seen = False
        for ci in range(starts[k], ends[k]):
            c = cat_l[ci]
            if c == CAT_DX:
                problems.append(phr_l[ci])
            elif c == CAT_MED:
                meds.append(phr_l[ci])
            elif c == CAT_PROC:
                procs.append(phr_l[ci])
            elif c == CAT_LAB:
                if ment_l[ci] and len(labs) < 8:
                    labs.append(txt_l[ci])
            elif c == CAT_SMOKING:
                smoking_seen = True
        vitals: dict[str, str] = {}
        sbp, dbp = vit_l["sbp"][k], vit_l["dbp"][k]
        if sbp == sbp and dbp == dbp:
            vitals["BP"] = f"{sbp:.0f}/{dbp:.0f}"
        for key, name, fmt in (("hr", "HR", "{:.0f}"), ("weight", "weight", "{:.1f} kg"), ("bmi", "BMI", "{:.1f}"), ("spo2", "SpO2", "{:.0f}%"),
                               ("temp", "temp", "{:.1f} C")):
            val = vit_l[key][k]
            if val == val:
                vitals[name] = fmt.format(val)
        reason = reason_dx.get(reason_l[k]) if reason_l[k] >= 0 else None
        reason_phrase = reason
        if reason is not None and reason in problems:
            problems.remove(reason)
        if reason is None and kind_l[k] == K_SIGNAL and problems:
            reason_phrase = problems.pop(0)
        smoking = None
        if smoking_seen:
            st = int(status[k])
            py = pop.pack_years_at(s, day_l[k])
            quit_year = int(1970 + pop.smoking_quit[s] / DAYS_PER_YEAR) if st == FORMER else None
            smoking = notes.smoking_phrase(st, py, quit_year)
        ctx_note = notes.VisitContext(
            date=str(np.datetime64(int(day_l[k]), "D")), setting=settings[enc_l[k]], age=int((day_l[k] - pop.birth[s]) / DAYS_PER_YEAR),
            female=bool(pop.female[s]), reason=reason_phrase, kind=kinds[kind_l[k]], problems=list(dict.fromkeys(problems)),
            medications=list(dict.fromkeys(meds)), vitals=vitals, labs=labs, procedures=list(dict.fromkeys(procs)), smoking=smoking)
        ctx.texts.append(notes.progress_note(r, ctx_note))
        text_idx[k] = len(ctx.texts) - 1
    rb.add(v.subject[noted], t[noted] + 90 * US_PER_MINUTE, ctx.ids.note["PROGRESS"], None, text_idx, ORDER_NOTE, None, noted)


__all__ = ["ShardContext", "add_background_visits", "add_derived_visits", "generate_visit_rows", "place_signals"]
