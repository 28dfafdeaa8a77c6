"""Subject-level sampling for one shard: demographics, case status, observation periods, smoking and conditions.

All arrays are numpy vectors over the shard's subjects (no per-subject Python objects). Times are float days since
1970-01-01. Cases are sampled first (cancer, sex and age at diagnosis from the cancer's profile), then their
risk factors with the profile's odds ratios; controls get background rates, so every risk-factor code exists in
both groups. Observation periods start years after birth, vary in length and are independent of case status,
except that a case's record must cover its diagnosis.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

import numpy as np

from vista.shared.synth.cancers import CANCER_KEYS, CANCERS
from vista.shared.synth.catalog import HISPANIC_SHARE, RACE_WEIGHTS, RACES
from vista.shared.synth.conditions import BLACK_RACE, CONDITION_INDEX, CONDITION_LIST, CURRENT_SMOKING, SMOKING
from vista.shared.synth.config import SynthConfig

DAYS_PER_YEAR = 365.25
EPOCH = date(1970, 1, 1)

NEVER, FORMER, CURRENT = 0, 1, 2
"""Smoking status codes (status at the subject's reference date)."""

TRAP_NONE, TRAP_SHORT_HISTORY, TRAP_PREVALENT, TRAP_LATE_CONFIRMATION, TRAP_PRIOR_CODE = 0, 1, 2, 3, 4
"""Case trap kinds: record starting under 180 days before diagnosis; an earlier code inside the washout;
confirming codes more than 60 days apart; a single isolated earlier code outside the washout (still an incident
case for the phenotype, but a code of the target cancer sits in the record long before the diagnosis — the leakage
a cohort must exclude)."""

BLACK = RACES.index("Black or African American")


def to_days(d: date) -> float:
    """Days since 1970-01-01 of a date (the generator's internal time axis)."""
    return float((d - EPOCH).days)


@dataclass(slots=True)
class Population:
    """The subjects of one shard as parallel numpy arrays (index i = the i-th subject of the shard)."""

    subject_id: np.ndarray
    female: np.ndarray
    race: np.ndarray
    hispanic: np.ndarray
    birth: np.ndarray
    record_start: np.ndarray
    record_end: np.ndarray
    death: np.ndarray
    reference: np.ndarray
    cancer: np.ndarray
    diagnosis: np.ndarray
    follow_end: np.ndarray
    trap: np.ndarray
    rule_out_cancer: np.ndarray
    smoking: np.ndarray
    smoking_start: np.ndarray
    smoking_quit: np.ndarray
    packs_per_day: np.ndarray
    smoking_documented: np.ndarray
    onset: np.ndarray
    documented: np.ndarray
    medication: np.ndarray
    bmi: np.ndarray
    height: np.ndarray
    visit_rate: np.ndarray

    @property
    def n(self) -> int:
        return len(self.subject_id)

    def age_at(self, i: int | np.ndarray, day: float | np.ndarray) -> np.ndarray:
        return (day - self.birth[i]) / DAYS_PER_YEAR

    def pack_years_at(self, i: int, day: float) -> float:
        """Cumulative pack-years of subject ``i`` at ``day`` (0 for never-smokers)."""
        if self.smoking[i] == NEVER:
            return 0.0
        end = min(day, self.smoking_quit[i]) if np.isfinite(self.smoking_quit[i]) else day
        return max(0.0, (end - self.smoking_start[i]) / DAYS_PER_YEAR * self.packs_per_day[i])


def _logit(p):
    p = np.clip(p, 1e-6, 1 - 1e-6)
    return np.log(p / (1 - p))


def _expit(x):
    return 1.0 / (1.0 + np.exp(-x))


def _split_normal(rng: np.random.Generator, median: np.ndarray, q1: np.ndarray, q3: np.ndarray) -> np.ndarray:
    """Draws with the given median and quartiles (a normal with different spreads on each side)."""
    z = rng.standard_normal(len(median))
    return np.where(z < 0, median + z * (median - q1) / 0.6745, median + z * (q3 - median) / 0.6745)


def risk_odds_ratios() -> np.ndarray:
    """(n_cancers + 1) x (n_conditions + 3) log odds ratios; the last cancer row is 'no cancer' (all zero).

    Columns: the conditions in `CONDITION_LIST` order, then smoking, current smoking and Black race.
    """
    n_cond = len(CONDITION_LIST)
    out = np.zeros((len(CANCER_KEYS) + 1, n_cond + 3))
    extra = {SMOKING: n_cond, CURRENT_SMOKING: n_cond + 1, BLACK_RACE: n_cond + 2}
    for ci, key in enumerate(CANCER_KEYS):
        for rf, odds in CANCERS[key].risk_factors:
            col = CONDITION_INDEX[rf] if rf in CONDITION_INDEX else extra[rf]
            out[ci, col] = np.log(odds)
    return out


def sample_population(config: SynthConfig, rng: np.random.Generator, first_subject: int, n: int) -> Population:
    """Sample ``n`` subjects (ids ``first_subject + 1 ...``) for one shard."""
    w0, w1 = to_days(config.window_start), to_days(config.window_end) + 1.0 - 1e-6
    n_cancers = len(CANCER_KEYS)
    log_or = risk_odds_ratios()
    n_cond = len(CONDITION_LIST)

    # --- case status, cancer, sex
    is_case = rng.random(n) < config.case_fraction
    weights = np.array([config.cancer_weights.get(k, CANCERS[k].weight) for k in CANCER_KEYS], dtype=float)
    weights /= weights.sum()
    cancer = np.where(is_case, rng.choice(n_cancers, size=n, p=weights), -1).astype(np.int16)
    cidx = np.where(cancer >= 0, cancer, n_cancers)
    female_share = np.array([CANCERS[k].female_share for k in CANCER_KEYS] + [config.control_female_share])
    female = rng.random(n) < female_share[cidx]

    # --- race / ethnicity (Black race is a risk factor for prostate cancer and myeloma)
    base = np.array(RACE_WEIGHTS) / sum(RACE_WEIGHTS)
    u = rng.random(n)
    black_or = np.exp(log_or[cidx, n_cond + 2])
    p_black = black_or * base[BLACK] / (1 - base[BLACK] + black_or * base[BLACK])
    other_scale = (1 - p_black) / (1 - base[BLACK])
    race = np.empty(n, dtype=np.int8)
    cum = np.zeros(n)
    race[:] = len(RACES) - 1
    assigned = np.zeros(n, dtype=bool)
    for r in range(len(RACES)):
        p_r = p_black if r == BLACK else base[r] * other_scale
        cum = cum + p_r
        hit = (~assigned) & (u < cum)
        race[hit] = r
        assigned |= hit
    hispanic = rng.random(n) < HISPANIC_SHARE

    # --- timelines
    age_med = np.array([CANCERS[k].age_median for k in CANCER_KEYS] + [0.0])
    age_q1 = np.array([CANCERS[k].age_q1 for k in CANCER_KEYS] + [0.0])
    age_q3 = np.array([CANCERS[k].age_q3 for k in CANCER_KEYS] + [0.0])
    age_dx = np.clip(_split_normal(rng, age_med[cidx], age_q1[cidx], age_q3[cidx]), 25.0, 96.0)

    trap = np.zeros(n, dtype=np.int8)
    u = rng.random(n)
    r1 = config.short_history_rate
    r2 = r1 + config.prevalent_rate
    r3 = r2 + config.late_confirmation_rate
    r4 = r3 + config.prior_code_rate
    trap[is_case & (u < r1)] = TRAP_SHORT_HISTORY
    trap[is_case & (u >= r1) & (u < r2)] = TRAP_PREVALENT
    trap[is_case & (u >= r2) & (u < r3)] = TRAP_LATE_CONFIRMATION
    trap[is_case & (u >= r3) & (u < r4)] = TRAP_PRIOR_CODE  # same draw u: the other traps keep their subjects

    history = np.exp(rng.normal(np.log(config.case_history_median_years), 0.7, n)) * DAYS_PER_YEAR
    history = np.clip(history, 0.6 * DAYS_PER_YEAR, 16.0 * DAYS_PER_YEAR)
    history = np.where(trap == TRAP_SHORT_HISTORY, rng.uniform(10.0, 170.0, n), history)
    latest_dx = w1 - 30.0
    too_long = w0 + history > latest_dx
    history = np.where(too_long, (latest_dx - w0) * rng.uniform(0.3, 1.0, n), history)
    diagnosis = w0 + history + rng.random(n) * (latest_dx - w0 - history)
    case_start = diagnosis - history
    case_birth = diagnosis - age_dx * DAYS_PER_YEAR
    adult = case_birth + 18.0 * DAYS_PER_YEAR
    case_start = np.maximum(case_start, adult)
    follow_end = diagnosis + np.exp(rng.normal(np.log(4.0), 0.9, n)) * DAYS_PER_YEAR

    left_censored = rng.random(n) < 0.25
    ctrl_start = np.where(left_censored, w0 + rng.random(n) * 180.0, w0 + rng.random(n) * (w1 - 120.0 - w0))
    length = np.clip(np.exp(rng.normal(np.log(config.control_record_median_years), 0.9, n)), 0.05, 18.0) * DAYS_PER_YEAR
    ctrl_end = np.minimum(ctrl_start + length, w1)
    reference_ctrl = ctrl_start + rng.random(n) * (ctrl_end - ctrl_start)
    old = rng.random(n) < 0.55
    age_ref_ctrl = np.clip(np.where(old, rng.normal(67.0, 11.0, n), rng.uniform(19.0, 90.0, n)), 18.5, 96.0)
    ctrl_birth = reference_ctrl - age_ref_ctrl * DAYS_PER_YEAR
    ctrl_start = np.maximum(ctrl_start, ctrl_birth + 18.0 * DAYS_PER_YEAR)
    ctrl_end = np.maximum(ctrl_end, ctrl_start + 1.0)
    reference_ctrl = np.clip(reference_ctrl, ctrl_start, ctrl_end)

    birth = np.floor(np.where(is_case, case_birth, ctrl_birth))
    record_start = np.where(is_case, case_start, ctrl_start)
    reference = np.where(is_case, diagnosis, reference_ctrl)
    record_end = np.where(is_case, np.minimum(follow_end, w1), ctrl_end)
    diagnosis = np.where(is_case, diagnosis, np.nan)
    follow_end = np.where(is_case, np.minimum(follow_end, w1), np.nan)

    # background mortality for controls (cases die in the oncology course)
    age_mid = ((record_start + record_end) / 2 - birth) / DAYS_PER_YEAR
    hazard = np.exp(-10.5 + 0.095 * age_mid)
    to_death = rng.exponential(1.0, n) / hazard * DAYS_PER_YEAR
    death = np.where(~is_case & (record_start + to_death < record_end), record_start + to_death, np.nan)
    record_end = np.where(np.isfinite(death), death, record_end)

    age_ref = (reference - birth) / DAYS_PER_YEAR

    # --- smoking
    male = ~female
    p_ever = np.where(male, 0.42, 0.34) * np.where(age_ref < 40, 0.75, 1.0)
    p_ever = _expit(_logit(p_ever) + log_or[cidx, n_cond])
    ever = rng.random(n) < p_ever
    p_current = np.where(age_ref < 50, 0.55, np.where(age_ref < 70, 0.38, 0.22))
    p_current = _expit(_logit(p_current) + log_or[cidx, n_cond + 1])
    current = ever & (rng.random(n) < p_current)
    smoking = np.where(ever, np.where(current, CURRENT, FORMER), NEVER).astype(np.int8)
    smoking_start = birth + rng.normal(17.5, 3.0, n).clip(12, 35) * DAYS_PER_YEAR
    years_since_quit = rng.uniform(0.5, 30.0, n)
    smoking_quit = np.where(smoking == FORMER, reference - years_since_quit * DAYS_PER_YEAR, np.inf)
    smoking_quit = np.where(smoking == FORMER, np.maximum(smoking_quit, smoking_start + 2 * DAYS_PER_YEAR), smoking_quit)
    heavy = np.exp(log_or[cidx, n_cond]) > 2.5
    packs_per_day = np.exp(rng.normal(np.log(0.85), 0.45, n)) * np.where(heavy, 1.35, 1.0)
    smoking_documented = rng.random(n) < 0.88

    # --- chronic conditions and risk factors
    onset = np.full((n, n_cond), np.inf)
    documented = np.zeros((n, n_cond), dtype=bool)
    medication = np.full((n, n_cond), -1, dtype=np.int16)
    has = np.zeros((n, n_cond), dtype=bool)
    ref_for_rf = np.where(is_case, diagnosis - 60.0, reference)
    for j, spec in enumerate(CONDITION_LIST):
        x = _logit(spec.prev_40) + (age_ref - 40.0) / 30.0 * (_logit(spec.prev_70) - _logit(spec.prev_40))
        x = x + np.where(female, np.log(spec.female_or), 0.0)
        x = x + np.where(ever, np.log(spec.smoking_or), 0.0)
        for dep, odds in spec.depends:
            x = x + np.where(has[:, CONDITION_INDEX[dep]], np.log(odds), 0.0)
        x = x + log_or[cidx, j]
        ok = age_ref >= spec.min_age
        if spec.sex == "F":
            ok &= female
        elif spec.sex == "M":
            ok &= male
        present = ok & (rng.random(n) < _expit(x))
        has[:, j] = present
        lo = np.maximum(birth + max(spec.min_age, 18.0) * DAYS_PER_YEAR, record_start - 15 * DAYS_PER_YEAR)
        associated = log_or[cidx, j] > 0
        hi = np.where(associated, ref_for_rf, reference)
        hi = np.maximum(hi, lo + 1.0)
        onset[:, j] = np.where(present, lo + rng.random(n) * (hi - lo), np.inf)
        documented[:, j] = present & (rng.random(n) < spec.p_documented)
        if spec.meds:
            pick = rng.integers(0, len(spec.meds), n)
            treated = documented[:, j] & (rng.random(n) < spec.p_treated)
            medication[:, j] = np.where(treated, pick, -1)

    obese = has[:, CONDITION_INDEX["obesity"]]
    bmi = np.where(obese, 30.0 + rng.gamma(2.0, 2.2, n), rng.normal(25.3, 2.6, n).clip(17.0, 29.9))
    height = np.where(female, rng.normal(162.5, 6.5, n), rng.normal(176.0, 7.0, n))

    morbidity = documented.sum(axis=1)
    rate = rng.gamma(1.1, config.visit_rate_mean / 1.1, n)
    rate *= np.clip(0.65 + 0.013 * (age_ref - 40.0), 0.5, 1.5) * np.minimum(1.0 + 0.08 * morbidity, 2.0)
    rate *= np.where(rng.random(n) < 0.1, 0.25, 1.0)

    # --- rule-out traps among non-cases: a cancer compatible with the subject's sex
    rule_out = np.full(n, -1, dtype=np.int16)
    candidates = (~is_case) & (rng.random(n) < config.rule_out_rate)
    f_share = female_share[:n_cancers]
    for sex_female in (True, False):
        sel = candidates & (female == sex_female)
        w = weights * (f_share if sex_female else (1 - f_share))
        w = w / w.sum()
        rule_out[sel] = rng.choice(n_cancers, size=int(sel.sum()), p=w)

    return Population(
        subject_id=np.arange(first_subject + 1, first_subject + n + 1, dtype=np.int64),
        female=female, race=race, hispanic=hispanic, birth=birth, record_start=record_start, record_end=record_end,
        death=death, reference=reference, cancer=cancer, diagnosis=diagnosis, follow_end=follow_end, trap=trap,
        rule_out_cancer=rule_out, smoking=smoking, smoking_start=smoking_start, smoking_quit=smoking_quit,
        packs_per_day=packs_per_day, smoking_documented=smoking_documented, onset=onset, documented=documented,
        medication=medication, bmi=bmi, height=height, visit_rate=rate,
    )
