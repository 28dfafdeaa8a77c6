"""Chronic conditions and cancer risk factors every synthetic patient may carry, with background prevalences.

Each condition is a latent state (present or not, with an onset date) sampled per subject; whether it ever reaches
the record is a separate draw (`p_documented`), which is how risk factors end up under-coded as in real EHRs.
Cancer profiles raise the odds of their risk factors in cases (`vista.shared.synth.cancers`), so the same codes appear in
controls at background rates and in cases more often.

Prevalence is logit-linear in age between ``prev_40`` (age 40) and ``prev_70`` (age 70), times odds ratios for
female sex, ever-smoking and earlier conditions.

>>> CONDITIONS["copd"].dx, CONDITIONS["copd"].smoking_or
('copd', 7.0)
"""

from __future__ import annotations

from dataclasses import dataclass

from vista.shared.synth.catalog import DX, LABS, MEDS, check_known


@dataclass(frozen=True, slots=True)
class ConditionSpec:
    """A chronic condition or risk factor: prevalence model, coding behaviour, treatment and lab effects.

    ``depends`` lists (earlier condition key, odds ratio) pairs; ``labs`` lists (lab key, shift) pairs applied to
    lab values after onset (shifts are in log units for log-scaled labs).
    """

    key: str
    dx: str
    prev_40: float
    prev_70: float
    female_or: float = 1.0
    sex: str | None = None
    smoking_or: float = 1.0
    depends: tuple[tuple[str, float], ...] = ()
    p_documented: float = 0.8
    p_per_visit: float = 0.35
    meds: tuple[str, ...] = ()
    p_treated: float = 0.0
    labs: tuple[tuple[str, float], ...] = ()
    min_age: float = 18.0


C = ConditionSpec
CONDITION_LIST: tuple[ConditionSpec, ...] = (
    C("obesity", "obesity", 0.36, 0.38, 1.05, p_documented=0.5, p_per_visit=0.3),
    C("hypertension", "hypertension", 0.15, 0.55, 0.9, smoking_or=1.1, depends=(("obesity", 1.8),), p_documented=0.92, p_per_visit=0.5,
      meds=("lisinopril", "amlodipine", "losartan", "hctz", "metoprolol"), p_treated=0.85, labs=(("sbp", 14.0), ("dbp", 7.0))),
    C("hyperlipidemia", "hyperlipidemia", 0.15, 0.45, smoking_or=1.1, depends=(("obesity", 1.5),), p_documented=0.85, p_per_visit=0.4,
      meds=("atorvastatin", "simvastatin", "rosuvastatin"), p_treated=0.7, labs=(("ldl", 35.0), ("cholesterol", 40.0), ("triglycerides", 0.25))),
    C("prediabetes", "prediabetes", 0.08, 0.15, depends=(("obesity", 2.0),), p_documented=0.55, p_per_visit=0.3, labs=(("glucose", 10.0), ("a1c", 0.5))),
    C("diabetes", "diabetes", 0.05, 0.21, 0.85, smoking_or=1.2, depends=(("obesity", 3.0),), p_documented=0.93, p_per_visit=0.55,
      meds=("metformin", "metformin", "metformin", "insulin_glargine", "glipizide"), p_treated=0.85, labs=(("glucose", 45.0), ("a1c", 1.9))),
    C("hypothyroidism", "hypothyroidism", 0.03, 0.09, 3.5, p_documented=0.85, p_per_visit=0.45, meds=("levothyroxine",), p_treated=0.95, labs=(("tsh", 0.6),)),
    C("osteoarthritis", "osteoarthritis", 0.05, 0.3, 1.3, depends=(("obesity", 1.5),), p_documented=0.7, p_per_visit=0.3,
      meds=("naproxen", "ibuprofen", "acetaminophen"), p_treated=0.5),
    C("depression", "depression", 0.12, 0.11, 1.8, smoking_or=1.4, p_documented=0.8, p_per_visit=0.35, meds=("sertraline", "escitalopram", "trazodone"), p_treated=0.7),
    C("anxiety", "anxiety", 0.10, 0.07, 1.8, smoking_or=1.2, p_documented=0.7, p_per_visit=0.3, meds=("sertraline", "escitalopram"), p_treated=0.5),
    C("asthma", "asthma", 0.08, 0.08, 1.4, smoking_or=1.2, p_documented=0.8, p_per_visit=0.35, meds=("albuterol", "fluticasone", "montelukast"), p_treated=0.85),
    C("cad", "cad", 0.01, 0.12, 0.5, smoking_or=1.8, depends=(("hypertension", 2.0), ("diabetes", 2.0), ("hyperlipidemia", 2.0)), p_documented=0.9,
      p_per_visit=0.5, meds=("metoprolol", "atorvastatin"), p_treated=0.8),
    C("afib", "afib", 0.003, 0.07, 0.7, depends=(("hypertension", 1.8),), p_documented=0.9, p_per_visit=0.5, meds=("apixaban", "warfarin", "metoprolol"), p_treated=0.8),
    C("chf", "chf", 0.003, 0.06, 0.8, smoking_or=1.4, depends=(("cad", 3.0), ("hypertension", 2.0), ("afib", 2.0)), p_documented=0.9, p_per_visit=0.55,
      meds=("furosemide", "metoprolol", "spironolactone"), p_treated=0.85),
    C("ckd", "ckd", 0.01, 0.12, smoking_or=1.2, depends=(("diabetes", 2.5), ("hypertension", 2.5)), p_documented=0.7, p_per_visit=0.4,
      labs=(("creatinine", 0.6), ("bun", 10.0))),
    C("allergic_rhinitis", "allergic_rhinitis", 0.12, 0.07, 1.2, p_documented=0.6, p_per_visit=0.25, meds=("fluticasone", "montelukast"), p_treated=0.6),
    C("insomnia", "insomnia", 0.05, 0.08, 1.5, p_documented=0.5, p_per_visit=0.25, meds=("trazodone",), p_treated=0.4),
    C("vitamin_d_deficiency", "vitamin_d_deficiency", 0.06, 0.08, 1.4, p_documented=0.6, p_per_visit=0.25, meds=("cholecalciferol",), p_treated=0.8),
    C("osteoporosis", "osteoporosis", 0.005, 0.12, 5.0, smoking_or=1.4, p_documented=0.7, p_per_visit=0.3, meds=("alendronate",), p_treated=0.6, min_age=50),
    C("migraine", "migraine", 0.08, 0.03, 3.0, p_documented=0.7, p_per_visit=0.3, meds=("sumatriptan",), p_treated=0.7),
    C("gout", "gout", 0.01, 0.05, 0.3, p_documented=0.8, p_per_visit=0.3, meds=("allopurinol",), p_treated=0.8),
    C("copd", "copd", 0.008, 0.07, 0.9, smoking_or=7.0, p_documented=0.8, p_per_visit=0.5, meds=("albuterol", "tiotropium", "budesonide"), p_treated=0.85,
      labs=(("spo2", -1.5),), min_age=35),
    C("emphysema", "emphysema", 0.003, 0.02, 0.9, smoking_or=6.0, depends=(("copd", 10.0),), p_documented=0.6, p_per_visit=0.3, min_age=35),
    C("gerd", "gerd", 0.12, 0.2, 1.1, smoking_or=1.3, depends=(("obesity", 1.6),), p_documented=0.8, p_per_visit=0.35,
      meds=("omeprazole", "pantoprazole", "famotidine"), p_treated=0.85),
    C("barrett", "barrett", 0.004, 0.015, 0.4, smoking_or=1.5, depends=(("gerd", 8.0),), p_documented=0.7, p_per_visit=0.3, meds=("omeprazole",), p_treated=0.9),
    C("h_pylori", "h_pylori", 0.02, 0.03, p_documented=0.7, p_per_visit=0.2, meds=("omeprazole",), p_treated=0.9),
    C("atrophic_gastritis", "atrophic_gastritis", 0.003, 0.012, 1.3, depends=(("h_pylori", 4.0),), p_documented=0.6, p_per_visit=0.2),
    C("alcohol", "alcohol_dependence", 0.045, 0.035, 0.4, smoking_or=2.0, p_documented=0.45, p_per_visit=0.35, meds=("naltrexone",), p_treated=0.2,
      labs=(("ast", 0.25), ("alt", 0.15), ("mcv", 3.0))),
    C("hepatitis_b", "hepatitis_b", 0.004, 0.004, 0.6, p_documented=0.8, p_per_visit=0.4, meds=("entecavir",), p_treated=0.5, labs=(("alt", 0.3),)),
    C("hepatitis_c", "hepatitis_c", 0.01, 0.012, 0.6, smoking_or=2.0, depends=(("alcohol", 2.0),), p_documented=0.8, p_per_visit=0.4,
      labs=(("alt", 0.5), ("ast", 0.4))),
    C("nafld", "nafld", 0.04, 0.06, 0.9, depends=(("obesity", 4.0), ("diabetes", 2.5)), p_documented=0.5, p_per_visit=0.3, labs=(("alt", 0.5), ("ast", 0.25))),
    C("cirrhosis", "cirrhosis", 0.002, 0.012, 0.6, smoking_or=1.2, depends=(("alcohol", 12.0), ("hepatitis_c", 10.0), ("hepatitis_b", 6.0), ("nafld", 4.0)),
      p_documented=0.85, p_per_visit=0.55, meds=("lactulose", "spironolactone", "furosemide", "rifaximin"), p_treated=0.7,
      labs=(("plt", -80.0), ("albumin", -0.6), ("bilirubin", 0.6), ("ast", 0.5), ("inr", 0.3))),
    C("hemochromatosis", "hemochromatosis", 0.002, 0.003, 0.6, p_documented=0.8, p_per_visit=0.3, labs=(("ferritin", 1.5), ("alt", 0.3))),
    C("ulcerative_colitis", "ulcerative_colitis", 0.006, 0.006, p_documented=0.85, p_per_visit=0.4, meds=("mesalamine",), p_treated=0.8),
    C("crohn", "crohn", 0.005, 0.004, 1.1, smoking_or=1.8, p_documented=0.85, p_per_visit=0.4, meds=("mesalamine", "prednisone"), p_treated=0.6),
    C("colon_polyps", "history_colon_polyps", 0.02, 0.12, 0.7, smoking_or=1.4, depends=(("obesity", 1.3),), p_documented=0.5, p_per_visit=0.3),
    C("fh_digestive", "fh_digestive", 0.04, 0.04, p_documented=0.35, p_per_visit=0.15),
    C("fh_lung", "fh_lung", 0.03, 0.03, p_documented=0.35, p_per_visit=0.15),
    C("fh_breast", "fh_breast", 0.07, 0.07, 2.5, p_documented=0.4, p_per_visit=0.15),
    C("fh_ovary", "fh_ovary", 0.015, 0.015, sex="F", p_documented=0.35, p_per_visit=0.15),
    C("fh_prostate", "fh_prostate", 0.05, 0.05, sex="M", p_documented=0.35, p_per_visit=0.15),
    C("fh_bladder", "fh_bladder", 0.01, 0.01, p_documented=0.3, p_per_visit=0.15),
    C("fh_leukemia", "fh_leukemia", 0.01, 0.01, p_documented=0.3, p_per_visit=0.15),
    C("fh_lymphoid", "fh_lymphoid", 0.01, 0.01, p_documented=0.3, p_per_visit=0.15),
    C("brca", "brca_breast", 0.003, 0.003, sex="F", p_documented=0.7, p_per_visit=0.3),
    C("hpv", "hpv_positive", 0.07, 0.02, sex="F", smoking_or=1.5, p_documented=0.8, p_per_visit=0.15),
    C("cin", "cin2", 0.008, 0.003, sex="F", smoking_or=1.5, depends=(("hpv", 15.0),), p_documented=0.9, p_per_visit=0.2),
    C("hiv", "hiv", 0.004, 0.004, 0.35, smoking_or=1.5, p_documented=0.9, p_per_visit=0.5),
    C("pcos", "pcos", 0.05, 0.02, sex="F", depends=(("obesity", 2.5),), p_documented=0.7, p_per_visit=0.3, meds=("metformin",), p_treated=0.3),
    C("endometrial_hyperplasia", "endometrial_hyperplasia", 0.003, 0.006, sex="F", depends=(("obesity", 2.5), ("pcos", 3.0)), p_documented=0.85,
      p_per_visit=0.3, meds=("medroxyprogesterone",), p_treated=0.5),
    C("endometriosis", "endometriosis", 0.06, 0.03, sex="F", p_documented=0.75, p_per_visit=0.3),
    C("bph", "bph", 0.08, 0.45, sex="M", p_documented=0.7, p_per_visit=0.4, meds=("tamsulosin", "finasteride"), p_treated=0.7, labs=(("psa", 0.35),), min_age=40),
    C("chronic_pancreatitis", "chronic_pancreatitis", 0.002, 0.004, smoking_or=2.0, depends=(("alcohol", 10.0),), p_documented=0.85, p_per_visit=0.4),
    C("mgus", "mgus", 0.004, 0.04, 0.8, p_documented=0.6, p_per_visit=0.3, labs=(("protein", 0.6),), min_age=40),
    C("mds", "mds", 0.0005, 0.006, 0.7, smoking_or=1.4, p_documented=0.9, p_per_visit=0.5, labs=(("hgb", -1.5), ("plt", -60.0), ("mcv", 6.0)), min_age=40),
    C("rheumatoid_arthritis", "rheumatoid_arthritis", 0.01, 0.025, 2.5, smoking_or=1.5, p_documented=0.9, p_per_visit=0.5,
      meds=("methotrexate", "prednisone"), p_treated=0.75, labs=(("crp", 1.0),)),
    C("kidney_transplant", "kidney_transplant", 0.001, 0.002, 0.7, p_documented=0.95, p_per_visit=0.6, meds=("tacrolimus", "prednisone"), p_treated=0.95,
      labs=(("creatinine", 0.4),)),
    C("asbestos", "asbestos_exposure", 0.005, 0.01, sex="M", p_documented=0.5, p_per_visit=0.3),
    C("hormone_therapy", "hormone_therapy", 0.02, 0.08, sex="F", p_documented=0.6, p_per_visit=0.35, meds=("estradiol", "medroxyprogesterone"), p_treated=0.95,
      min_age=45),
    C("dense_breast", "dense_breast", 0.25, 0.12, sex="F", p_documented=0.45, p_per_visit=0.15, min_age=40),
    C("fibrocystic_breast", "fibrocystic_breast", 0.06, 0.03, sex="F", p_documented=0.6, p_per_visit=0.2),
)
del C

CONDITIONS: dict[str, ConditionSpec] = {c.key: c for c in CONDITION_LIST}
CONDITION_INDEX: dict[str, int] = {c.key: i for i, c in enumerate(CONDITION_LIST)}

SMOKING = "smoking"
"""Risk-factor key for ever-smoking (modelled separately from the conditions: never/former/current with pack-years)."""
CURRENT_SMOKING = "current_smoking"
"""Risk-factor key raising the share of current (rather than former) smokers among a cancer's ever-smoking cases."""
BLACK_RACE = "black_race"
"""Risk-factor key for the higher incidence of prostate cancer and myeloma in Black patients."""


def _check() -> None:
    for c in CONDITION_LIST:
        owner = f"condition {c.key}"
        check_known(owner, "diagnosis", [c.dx], DX)
        check_known(owner, "medication", c.meds, MEDS)
        check_known(owner, "lab", (lab for lab, _ in c.labs), LABS)
        for dep, _ in c.depends:
            if CONDITION_INDEX.get(dep, len(CONDITION_LIST)) >= CONDITION_INDEX[c.key]:
                raise ValueError(f"condition {c.key}: dependency {dep!r} must be listed before it")


_check()
