"""The 15 TrajOnco cancers: codes, demographics (TrajOnco Table 1), risk factors with odds ratios, pre-diagnostic
signals with lead times, lab drifts, the diagnostic work-up, staging, histology and survival.

Codes follow the paper's definition (ICD-10-CM C22 liver, C34 lung, C61 prostate, C50 breast, C67 bladder, C53
cervix, C15 esophagus, C54.1 endometrium, C16 stomach, C56 ovary, C25 pancreas, C18-C20 colorectal, C91-C95
leukemia, C90.0 myeloma, C81-C88 lymphoma) with their ICD-9-CM counterparts for visits before October 2015.
`CANCER_CODE_PREFIXES` is what a phenotype should match; `cancer_of_code` applies it to one MEDS code.

>>> cancer_of_code("ICD10CM//C34.11"), cancer_of_code("ICD9CM//162.3"), cancer_of_code("ICD10CM//Z85.118")
('lung', 'lung', None)
>>> cancer_of_code("ICD10CM//C54.1"), cancer_of_code("ICD10CM//C90.00"), cancer_of_code("ICD9CM//203.00")
('endometrial', 'myeloma', 'myeloma')
"""

from __future__ import annotations

from dataclasses import dataclass

from vista.shared.meds import schema
from vista.shared.synth.catalog import DX, LABS, PROCEDURES, Diagnosis, check_known
from vista.shared.synth.conditions import BLACK_RACE, CONDITIONS, CURRENT_SMOKING, SMOKING


@dataclass(frozen=True, slots=True)
class CancerSite:
    """One diagnosis code of a cancer, the anatomic site and laterality it implies, and its share of cases.

    ``histologies`` restricts which histologies go with this code (e.g. C22.1 is cholangiocarcinoma).
    """

    icd10: str
    icd9: str
    icd9_description: str
    site: str
    laterality: str | None
    weight: float
    histologies: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Histology:
    """A histologic type with its ICD-O-3 morphology code, share of cases and flags used by treatment choice."""

    name: str
    icdo3: str
    weight: float
    flags: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Signal:
    """A pre-diagnostic diagnosis code shown by a share ``p`` of cases.

    Lead times (days before diagnosis) are mostly short (exponential with mean ``lead_days``); a share ``p_early``
    of occurrences come 1-3 years earlier. ``repeats`` is the mean number of extra occurrences.
    """

    dx: str
    p: float
    lead_days: float
    p_early: float = 0.0
    repeats: float = 0.5


@dataclass(frozen=True, slots=True)
class LabDrift:
    """A lab that drifts by ``magnitude`` (lab units, or log units for log labs) over the lead time before diagnosis."""

    lab: str
    p: float
    magnitude: float
    lead_days: float
    p_early: float = 0.0


@dataclass(frozen=True, slots=True)
class Step:
    """One visit of the diagnostic work-up (``lo``-``hi`` days before diagnosis) or of staging (days after).

    All ``procedures`` are performed, plus one of ``choice`` when given; ``dx`` are the reason/finding codes,
    ``labs`` the panels drawn; ``note`` is the report written for it ("RADIOLOGY" or "PATHOLOGY").
    """

    lo: int
    hi: int
    procedures: tuple[str, ...] = ()
    choice: tuple[str, ...] = ()
    dx: tuple[str, ...] = ()
    labs: tuple[str, ...] = ()
    note: str | None = None
    encounter: str = "AMB"


@dataclass(frozen=True, slots=True)
class WorkupPath:
    """A way a cancer comes to diagnosis (screening, symptoms, incidental finding) as an ordered list of steps."""

    name: str
    weight: float
    steps: tuple[Step, ...]
    screening: str | None = None


@dataclass(frozen=True, slots=True)
class StageOption:
    """A (T, N, M, group) combination inside a stage bucket, with its weight."""

    t: str | None
    n: str | None
    m: str | None
    group: str
    weight: float = 1.0


@dataclass(frozen=True, slots=True)
class CancerProfile:
    """Everything the generator needs to simulate one cancer type."""

    key: str
    name: str
    icd10_prefixes: tuple[str, ...]
    icd9_prefixes: tuple[str, ...]
    sites: tuple[CancerSite, ...]
    histologies: tuple[Histology, ...]
    female_share: float
    age_median: float
    age_q1: float
    age_q3: float
    weight: float
    risk_factors: tuple[tuple[str, float], ...]
    signals: tuple[Signal, ...]
    drifts: tuple[LabDrift, ...]
    workup: tuple[WorkupPath, ...]
    staging: tuple[Step, ...]
    stage_system: str
    stage_weights: tuple[float, float, float, float]
    stage_options: tuple[tuple[StageOption, ...], tuple[StageOption, ...], tuple[StageOption, ...], tuple[StageOption, ...]]
    p_recurrence: tuple[float, float, float]
    metastatic_os_months: float
    history_dx: str
    metastasis_dx: tuple[str, ...]
    markers: tuple[str, ...] = ()

    def site_diagnoses(self) -> list[Diagnosis]:
        """The cancer's diagnosis codes as catalog `Diagnosis` entries (keys ``<cancer>:<icd10>``)."""
        return [Diagnosis(f"{self.key}:{s.icd10}", s.icd10, s.icd9, s.icd9_description, f"{s.site} {self.name.lower()}") for s in self.sites]


def _stages(text: str) -> tuple[StageOption, ...]:
    """Parse ``"T1a N0 M0 IA1 2; T1b N0 M0 IA2 3"`` (T N M group [weight]); use ``-`` for a missing part."""
    out = []
    for item in text.split(";"):
        parts = item.split()
        if not parts:
            continue
        weight = float(parts[4]) if len(parts) > 4 else 1.0
        t, n, m, group = (None if p == "-" else p for p in parts[:4])
        out.append(StageOption(t, n, m, group or "", weight))
    return tuple(out)


S = Signal
LD = LabDrift
H = Histology
CS = CancerSite

_LUNG_BIOPSY = ("bronch_biopsy", "lung_biopsy", "ebus")

PROFILES: tuple[CancerProfile, ...] = (
    CancerProfile(
        key="lung", name="Lung cancer", icd10_prefixes=("C34",), icd9_prefixes=("162",),
        sites=(CS("C34.11", "162.3", "Malignant neoplasm of upper lobe, bronchus or lung", "right upper lobe", "right", 0.32),
               CS("C34.12", "162.3", "Malignant neoplasm of upper lobe, bronchus or lung", "left upper lobe", "left", 0.24),
               CS("C34.2", "162.4", "Malignant neoplasm of middle lobe, bronchus or lung", "right middle lobe", "right", 0.05),
               CS("C34.31", "162.5", "Malignant neoplasm of lower lobe, bronchus or lung", "right lower lobe", "right", 0.16),
               CS("C34.32", "162.5", "Malignant neoplasm of lower lobe, bronchus or lung", "left lower lobe", "left", 0.13),
               CS("C34.90", "162.9", "Malignant neoplasm of bronchus and lung, unspecified", "lung", None, 0.10)),
        histologies=(H("adenocarcinoma", "8140/3", 0.50, ("nsclc", "nonsquamous")), H("squamous cell carcinoma", "8070/3", 0.25, ("nsclc", "squamous")),
                     H("small cell carcinoma", "8041/3", 0.13, ("sclc",)), H("large cell carcinoma", "8012/3", 0.04, ("nsclc", "nonsquamous")),
                     H("non-small cell carcinoma, NOS", "8046/3", 0.08, ("nsclc", "nonsquamous"))),
        female_share=0.584, age_median=71.6, age_q1=65.6, age_q3=78.2, weight=0.145,
        risk_factors=((SMOKING, 8.0), (CURRENT_SMOKING, 2.0), ("copd", 2.2), ("emphysema", 2.0), ("fh_lung", 1.8), ("asbestos", 2.5)),
        signals=(S("cough", 0.50, 75, 0.18, 0.8), S("dyspnea", 0.32, 60, 0.12), S("hemoptysis", 0.12, 30, 0.03), S("weight_loss", 0.22, 60, 0.06),
                 S("chest_pain", 0.18, 45, 0.06), S("pneumonia", 0.14, 90, 0.15), S("lung_nodule", 0.20, 150, 0.35), S("fatigue", 0.18, 60, 0.08),
                 S("hoarseness", 0.05, 45, 0.02), S("pleural_effusion", 0.07, 25, 0.0), S("copd_exacerbation", 0.08, 120, 0.2)),
        drifts=(LD("hgb", 0.2, -1.2, 150, 0.15), LD("plt", 0.15, 90.0, 120, 0.1), LD("albumin", 0.15, -0.5, 90), LD("bmi", 0.3, -1.8, 150, 0.1),
                LD("calcium", 0.05, 1.2, 45)),
        workup=(WorkupPath("symptomatic", 0.6, (Step(40, 90, ("chest_xray",), dx=("cough", "abnormal_lung_imaging"), note="RADIOLOGY"),
                                                 Step(15, 39, ("ct_chest_contrast",), dx=("abnormal_lung_imaging",), note="RADIOLOGY"),
                                                 Step(2, 14, choice=_LUNG_BIOPSY, procedures=("surgical_path",), dx=("abnormal_lung_imaging",), note="PATHOLOGY"))),
                WorkupPath("screening", 0.15, (Step(35, 100, ("ldct",), dx=("screen_lung", "lung_nodule"), note="RADIOLOGY"),
                                                Step(15, 34, ("pet_ct",), dx=("lung_nodule",), note="RADIOLOGY"),
                                                Step(2, 14, choice=_LUNG_BIOPSY, procedures=("surgical_path",), dx=("lung_nodule",), note="PATHOLOGY")), screening="lung"),
                WorkupPath("incidental", 0.25, (Step(30, 80, ("ct_chest_contrast",), dx=("chest_pain", "lung_nodule"), encounter="ED", note="RADIOLOGY"),
                                                 Step(15, 29, ("pet_ct",), dx=("lung_nodule",), note="RADIOLOGY"),
                                                 Step(2, 14, choice=_LUNG_BIOPSY, procedures=("surgical_path",), dx=("lung_nodule",), note="PATHOLOGY")))),
        staging=(Step(3, 21, ("pet_ct",), note="RADIOLOGY"), Step(5, 25, ("mri_brain",), note="RADIOLOGY")),
        stage_system="AJCC 8th", stage_weights=(0.25, 0.10, 0.20, 0.45),
        stage_options=(_stages("T1a N0 M0 IA1 1; T1b N0 M0 IA2 2; T1c N0 M0 IA3 2; T2a N0 M0 IB 2"),
                       _stages("T2b N0 M0 IIA 1; T1c N1 M0 IIB 1; T2a N1 M0 IIB 1; T3 N0 M0 IIB 1"),
                       _stages("T1c N2 M0 IIIA 2; T3 N1 M0 IIIA 1; T4 N0 M0 IIIA 1; T3 N2 M0 IIIB 1; T4 N2 M0 IIIB 1; T4 N3 M0 IIIC 0.5"),
                       _stages("T2a N2 M1a IVA 2; T3 N2 M1b IVA 1; T4 N3 M1c IVB 2")),
        p_recurrence=(0.25, 0.45, 0.6), metastatic_os_months=12, history_dx="hx_lung_cancer",
        metastasis_dx=("mets_bone", "mets_brain", "mets_liver", "mets_nodes_thoracic"), markers=("cea",)),
    CancerProfile(
        key="breast", name="Breast cancer", icd10_prefixes=("C50",), icd9_prefixes=("174", "175"),
        sites=(CS("C50.411", "174.4", "Malignant neoplasm of upper-outer quadrant of female breast", "upper-outer quadrant of the right breast", "right", 0.25),
               CS("C50.412", "174.4", "Malignant neoplasm of upper-outer quadrant of female breast", "upper-outer quadrant of the left breast", "left", 0.25),
               CS("C50.911", "174.9", "Malignant neoplasm of breast (female), unspecified", "right breast", "right", 0.24),
               CS("C50.912", "174.9", "Malignant neoplasm of breast (female), unspecified", "left breast", "left", 0.24),
               CS("C50.921", "175.9", "Malignant neoplasm of other and unspecified sites of male breast", "right breast", "right", 0.01),
               CS("C50.922", "175.9", "Malignant neoplasm of other and unspecified sites of male breast", "left breast", "left", 0.01)),
        histologies=(H("invasive ductal carcinoma", "8500/3", 0.78), H("invasive lobular carcinoma", "8520/3", 0.15),
                     H("mixed ductal and lobular carcinoma", "8522/3", 0.07)),
        female_share=0.996, age_median=68.1, age_q1=60.0, age_q3=76.3, weight=0.14,
        risk_factors=(("brca", 8.0), ("fh_breast", 3.5), ("hormone_therapy", 2.0), ("dense_breast", 3.0), ("obesity", 1.3), ("alcohol", 1.3),
                      ("fibrocystic_breast", 1.8)),
        signals=(S("breast_lump", 0.42, 30, 0.3, 0.3), S("abnormal_mammogram", 0.45, 40, 0.6, 0.5), S("mastodynia", 0.2, 60, 0.55),
                 S("lymphadenopathy", 0.06, 40, 0.0), S("fibrocystic_breast", 0.3, 400, 0.6, 0.2)),
        drifts=(LD("bmi", 0.05, -1.0, 120),),
        workup=(WorkupPath("screening", 0.6, (Step(20, 60, ("mammo_screen",), dx=("screen_breast", "abnormal_mammogram"), note="RADIOLOGY"),
                                               Step(10, 19, ("mammo_diag", "us_breast"), dx=("abnormal_mammogram",), note="RADIOLOGY"),
                                               Step(2, 9, ("breast_biopsy", "surgical_path", "ihc"), dx=("abnormal_mammogram",), note="PATHOLOGY")), screening="breast"),
                WorkupPath("symptomatic", 0.4, (Step(20, 60, (), dx=("breast_lump",)),
                                                 Step(10, 19, ("mammo_diag", "us_breast"), dx=("breast_lump",), note="RADIOLOGY"),
                                                 Step(2, 9, ("breast_biopsy", "surgical_path", "ihc"), dx=("breast_lump",), note="PATHOLOGY")))),
        staging=(Step(4, 20, ("mri_breast",), note="RADIOLOGY"),),
        stage_system="AJCC 8th", stage_weights=(0.45, 0.33, 0.14, 0.08),
        stage_options=(_stages("T1c N0 M0 IA 3; T1b N0 M0 IA 1; T1c N1mi M0 IB 0.3"), _stages("T2 N0 M0 IIA 2; T1c N1 M0 IIA 1; T2 N1 M0 IIB 1; T3 N0 M0 IIB 0.5"),
                       _stages("T2 N2 M0 IIIA 1; T3 N1 M0 IIIA 1; T4b N1 M0 IIIB 0.5; T2 N3 M0 IIIC 0.5"), _stages("T2 N1 M1 IV 1; T3 N2 M1 IV 1")),
        p_recurrence=(0.07, 0.15, 0.3), metastatic_os_months=40, history_dx="hx_breast_cancer",
        metastasis_dx=("mets_bone", "mets_liver", "mets_lung", "mets_nodes_axillary"), markers=("cea",)),
    CancerProfile(
        key="prostate", name="Prostate cancer", icd10_prefixes=("C61",), icd9_prefixes=("185",),
        sites=(CS("C61", "185", "Malignant neoplasm of prostate", "prostate", None, 1.0),),
        histologies=(H("acinar adenocarcinoma", "8140/3", 0.97), H("ductal adenocarcinoma", "8500/3", 0.03)),
        female_share=0.0, age_median=72.3, age_q1=66.3, age_q3=78.7, weight=0.12,
        risk_factors=(("fh_prostate", 2.5), (BLACK_RACE, 2.0), ("bph", 1.3), ("brca", 2.0)),
        signals=(S("elevated_psa", 0.45, 240, 0.5, 0.8), S("bph_luts", 0.3, 365, 0.45), S("nocturia", 0.2, 200, 0.35), S("urinary_frequency", 0.2, 200, 0.35),
                 S("hematuria", 0.05, 90, 0.1), S("erectile_dysfunction", 0.08, 300, 0.3), S("back_pain", 0.05, 60, 0.0)),
        drifts=(LD("psa", 0.75, 1.6, 400, 0.45),),
        workup=(WorkupPath("psa", 0.85, (Step(60, 180, (), dx=("elevated_psa",), labs=("psa",)),
                                          Step(30, 59, (), dx=("elevated_psa",), labs=("psa",)),
                                          Step(14, 29, ("mri_pelvis",), dx=("elevated_psa",), note="RADIOLOGY"),
                                          Step(2, 13, ("prostate_biopsy", "surgical_path"), dx=("elevated_psa",), note="PATHOLOGY")), screening="prostate"),
                WorkupPath("symptomatic", 0.15, (Step(40, 120, (), dx=("bph_luts", "nocturia"), labs=("psa",)),
                                                  Step(14, 39, ("mri_pelvis",), dx=("elevated_psa",), note="RADIOLOGY"),
                                                  Step(2, 13, ("prostate_biopsy", "surgical_path"), dx=("elevated_psa",), note="PATHOLOGY")))),
        staging=(Step(5, 30, ("bone_scan",), note="RADIOLOGY"),),
        stage_system="AJCC 8th", stage_weights=(0.30, 0.42, 0.18, 0.10),
        stage_options=(_stages("T1c N0 M0 I 3; T2a N0 M0 I 1"), _stages("T2a N0 M0 IIA 1; T2b N0 M0 IIB 1; T2c N0 M0 IIC 1"),
                       _stages("T3a N0 M0 IIIA 1; T3b N0 M0 IIIB 1; T2c N0 M0 IIIC 1"), _stages("T3a N1 M0 IVA 1; T3b N1 M1b IVB 2")),
        p_recurrence=(0.08, 0.18, 0.35), metastatic_os_months=48, history_dx="hx_prostate_cancer",
        metastasis_dx=("mets_bone", "mets_nodes_abdominal"), markers=("psa",)),
    CancerProfile(
        key="colorectal", name="Colorectal cancer", icd10_prefixes=("C18", "C19", "C20"), icd9_prefixes=("153", "154.0", "154.1"),
        sites=(CS("C18.7", "153.3", "Malignant neoplasm of sigmoid colon", "sigmoid colon", None, 0.25),
               CS("C18.2", "153.6", "Malignant neoplasm of ascending colon", "ascending colon", None, 0.15),
               CS("C18.0", "153.4", "Malignant neoplasm of cecum", "cecum", None, 0.15),
               CS("C18.4", "153.1", "Malignant neoplasm of transverse colon", "transverse colon", None, 0.08),
               CS("C19", "154.0", "Malignant neoplasm of rectosigmoid junction", "rectosigmoid junction", None, 0.09),
               CS("C20", "154.1", "Malignant neoplasm of rectum", "rectum", None, 0.28)),
        histologies=(H("adenocarcinoma", "8140/3", 0.88), H("mucinous adenocarcinoma", "8480/3", 0.10), H("signet ring cell carcinoma", "8490/3", 0.02)),
        female_share=0.514, age_median=70.3, age_q1=60.5, age_q3=79.7, weight=0.12,
        risk_factors=(("colon_polyps", 3.0), ("fh_digestive", 2.2), ("ulcerative_colitis", 2.5), ("crohn", 2.0), ("obesity", 1.3), ("diabetes", 1.3),
                      (SMOKING, 1.2), ("alcohol", 1.3)),
        signals=(S("iron_deficiency_anemia", 0.36, 120, 0.45), S("rectal_bleeding", 0.3, 90, 0.35), S("bowel_habit_change", 0.18, 90, 0.3),
                 S("abdominal_pain", 0.24, 60, 0.2), S("weight_loss", 0.14, 60, 0.1), S("occult_blood", 0.14, 45, 0.2), S("constipation", 0.15, 120, 0.35),
                 S("fatigue", 0.15, 90, 0.2), S("anemia", 0.15, 150, 0.4)),
        drifts=(LD("hgb", 0.5, -2.6, 240, 0.4), LD("mcv", 0.4, -9.0, 240, 0.4), LD("ferritin", 0.35, -1.6, 240, 0.4), LD("cea", 0.5, 1.5, 120, 0.1),
                LD("plt", 0.2, 80.0, 180, 0.2)),
        workup=(WorkupPath("screening", 0.35, (Step(3, 25, ("screening_colonoscopy", "colonoscopy_biopsy", "surgical_path"), dx=("screen_colon",), note="PATHOLOGY"),),
                           screening="colon"),
                WorkupPath("symptomatic", 0.5, (Step(30, 90, (), dx=("rectal_bleeding", "iron_deficiency_anemia"), labs=("cbc", "ferritin")),
                                                 Step(3, 25, ("colonoscopy_biopsy", "surgical_path"), dx=("rectal_bleeding",), note="PATHOLOGY"))),
                WorkupPath("emergent", 0.15, (Step(8, 20, ("ct_abd_pelvis",), dx=("abdominal_pain",), labs=("cbc", "cmp"), encounter="ED", note="RADIOLOGY"),
                                               Step(1, 7, ("colonoscopy_biopsy", "surgical_path"), dx=("abdominal_pain",), note="PATHOLOGY")))),
        staging=(Step(3, 20, ("ct_chest_contrast", "ct_abd_pelvis"), labs=("cea",), note="RADIOLOGY"),),
        stage_system="AJCC 8th", stage_weights=(0.20, 0.27, 0.30, 0.23),
        stage_options=(_stages("T1 N0 M0 I 1; T2 N0 M0 I 1"), _stages("T3 N0 M0 IIA 3; T4a N0 M0 IIB 1"),
                       _stages("T2 N1a M0 IIIA 1; T3 N1b M0 IIIB 2; T4a N2a M0 IIIC 1"), _stages("T3 N1 M1a IVA 2; T4a N2 M1b IVB 1; T3 N2 M1c IVC 0.5")),
        p_recurrence=(0.07, 0.2, 0.35), metastatic_os_months=28, history_dx="hx_colon_cancer",
        metastasis_dx=("mets_liver", "mets_lung", "mets_peritoneum"), markers=("cea",)),
    CancerProfile(
        key="bladder", name="Bladder cancer", icd10_prefixes=("C67",), icd9_prefixes=("188",),
        sites=(CS("C67.9", "188.9", "Malignant neoplasm of bladder, part unspecified", "bladder", None, 0.6),
               CS("C67.2", "188.2", "Malignant neoplasm of lateral wall of urinary bladder", "lateral wall of the bladder", None, 0.25),
               CS("C67.0", "188.0", "Malignant neoplasm of trigone of urinary bladder", "bladder trigone", None, 0.15)),
        histologies=(H("urothelial carcinoma", "8120/3", 0.92), H("squamous cell carcinoma", "8070/3", 0.05), H("adenocarcinoma", "8140/3", 0.03)),
        female_share=0.27, age_median=74.1, age_q1=67.1, age_q3=80.7, weight=0.05,
        risk_factors=((SMOKING, 3.0), (CURRENT_SMOKING, 1.5), ("fh_bladder", 1.8)),
        signals=(S("hematuria", 0.45, 150, 0.45, 0.8), S("gross_hematuria", 0.35, 30, 0.15), S("uti", 0.28, 180, 0.45, 0.6), S("dysuria", 0.15, 90, 0.3),
                 S("urinary_frequency", 0.15, 120, 0.3)),
        drifts=(LD("hgb", 0.15, -1.0, 120),),
        workup=(WorkupPath("hematuria", 1.0, (Step(40, 120, ("urinalysis", "urine_cytology"), dx=("gross_hematuria",)),
                                               Step(20, 39, ("ct_urogram",), dx=("hematuria",), note="RADIOLOGY"),
                                               Step(2, 19, ("cystoscopy_biopsy", "surgical_path"), dx=("hematuria",), note="PATHOLOGY"))),),
        staging=(Step(5, 25, ("ct_chest_contrast",), note="RADIOLOGY"),),
        stage_system="AJCC 8th", stage_weights=(0.55, 0.18, 0.12, 0.15),
        stage_options=(_stages("Ta N0 M0 0a 2; Tis N0 M0 0is 0.5; T1 N0 M0 I 2"), _stages("T2a N0 M0 II 1; T2b N0 M0 II 1"),
                       _stages("T3a N0 M0 IIIA 1; T2 N1 M0 IIIA 1; T3 N2 M0 IIIB 0.5"), _stages("T3 N1 M1a IVA 1; T4 N2 M1b IVB 1")),
        p_recurrence=(0.35, 0.4, 0.55), metastatic_os_months=14, history_dx="hx_bladder_cancer",
        metastasis_dx=("mets_bone", "mets_lung", "mets_liver", "mets_nodes_abdominal")),
    CancerProfile(
        key="cervical", name="Cervical cancer", icd10_prefixes=("C53",), icd9_prefixes=("180",),
        sites=(CS("C53.9", "180.9", "Malignant neoplasm of cervix uteri, unspecified", "cervix", None, 0.7),
               CS("C53.0", "180.0", "Malignant neoplasm of endocervix", "endocervix", None, 0.3)),
        histologies=(H("squamous cell carcinoma", "8070/3", 0.75), H("adenocarcinoma", "8140/3", 0.22), H("adenosquamous carcinoma", "8560/3", 0.03)),
        female_share=1.0, age_median=60.3, age_q1=46.7, age_q3=68.9, weight=0.03,
        risk_factors=(("hpv", 10.0), ("cin", 6.0), (SMOKING, 1.6), ("hiv", 3.0)),
        signals=(S("pap_hsil", 0.35, 300, 0.6), S("hpv_positive", 0.35, 450, 0.65, 0.6), S("cin2", 0.22, 400, 0.6), S("pap_ascus", 0.2, 600, 0.65),
                 S("abnormal_uterine_bleeding", 0.3, 60, 0.15), S("pelvic_pain", 0.15, 60, 0.15)),
        drifts=(LD("hgb", 0.1, -1.0, 90),),
        workup=(WorkupPath("screening", 0.6, (Step(40, 120, ("pap", "hpv_test"), dx=("screen_cervix", "pap_hsil", "hpv_positive")),
                                               Step(3, 30, ("colposcopy_biopsy", "surgical_path"), dx=("pap_hsil",), note="PATHOLOGY")), screening="cervix"),
                WorkupPath("symptomatic", 0.4, (Step(30, 90, ("pap",), dx=("abnormal_uterine_bleeding",)),
                                                 Step(3, 29, ("colposcopy_biopsy", "surgical_path"), dx=("abnormal_uterine_bleeding",), note="PATHOLOGY")))),
        staging=(Step(5, 25, ("pet_ct",), note="RADIOLOGY"), Step(5, 25, ("mri_pelvis",), note="RADIOLOGY")),
        stage_system="FIGO 2018", stage_weights=(0.45, 0.2, 0.2, 0.15),
        stage_options=(_stages("T1b1 N0 M0 IB1 1; T1b2 N0 M0 IB2 1; T1a2 N0 M0 IA2 0.5"), _stages("T2a N0 M0 IIA 1; T2b N0 M0 IIB 2"),
                       _stages("T3a N0 M0 IIIA 0.5; T3b N0 M0 IIIB 1; T2b N1 M0 IIIC1 1.5"), _stages("T4 N1 M0 IVA 1; T3 N1 M1 IVB 1")),
        p_recurrence=(0.1, 0.25, 0.4), metastatic_os_months=18, history_dx="hx_cervical_cancer",
        metastasis_dx=("mets_lung", "mets_nodes_abdominal", "mets_bone")),
    CancerProfile(
        key="esophageal", name="Esophageal cancer", icd10_prefixes=("C15",), icd9_prefixes=("150",),
        sites=(CS("C15.5", "150.5", "Malignant neoplasm of lower third of esophagus", "distal esophagus", None, 0.65),
               CS("C15.4", "150.4", "Malignant neoplasm of middle third of esophagus", "mid esophagus", None, 0.25, ("squamous cell carcinoma",)),
               CS("C15.3", "150.3", "Malignant neoplasm of upper third of esophagus", "proximal esophagus", None, 0.10, ("squamous cell carcinoma",))),
        histologies=(H("adenocarcinoma", "8140/3", 0.6), H("squamous cell carcinoma", "8070/3", 0.4, ("squamous",))),
        female_share=0.24, age_median=71.1, age_q1=63.9, age_q3=78.2, weight=0.03,
        risk_factors=(("barrett", 10.0), ("gerd", 2.5), (SMOKING, 2.5), ("alcohol", 2.5), ("obesity", 1.8)),
        signals=(S("dysphagia", 0.6, 90, 0.3, 0.8), S("weight_loss", 0.35, 75, 0.22), S("gerd", 0.35, 365, 0.6), S("chest_wall_pain", 0.15, 60, 0.2),
                 S("iron_deficiency_anemia", 0.15, 120, 0.25), S("hoarseness", 0.06, 60), S("nausea_vomiting", 0.1, 45)),
        drifts=(LD("hgb", 0.25, -1.5, 150, 0.15), LD("bmi", 0.4, -2.5, 120, 0.1), LD("albumin", 0.2, -0.5, 90)),
        workup=(WorkupPath("dysphagia", 1.0, (Step(30, 90, (), dx=("dysphagia",)),
                                               Step(3, 29, ("egd_biopsy", "surgical_path"), dx=("dysphagia",), note="PATHOLOGY"))),),
        staging=(Step(4, 21, ("pet_ct",), note="RADIOLOGY"), Step(7, 28, ("eus",), note="RADIOLOGY")),
        stage_system="AJCC 8th", stage_weights=(0.15, 0.2, 0.3, 0.35),
        stage_options=(_stages("T1b N0 M0 I 1; T2 N0 M0 IB 0.5"), _stages("T2 N0 M0 IIA 1; T3 N0 M0 IIB 1; T1 N1 M0 IIB 0.5"),
                       _stages("T3 N1 M0 III 2; T2 N2 M0 III 1; T4a N1 M0 IVA 0.5"), _stages("T3 N2 M1 IVB 1")),
        p_recurrence=(0.3, 0.45, 0.6), metastatic_os_months=10, history_dx="hx_esophageal_cancer",
        metastasis_dx=("mets_liver", "mets_lung", "mets_nodes_abdominal", "mets_bone")),
    CancerProfile(
        key="endometrial", name="Endometrial cancer", icd10_prefixes=("C54",), icd9_prefixes=("182",),
        sites=(CS("C54.1", "182.0", "Malignant neoplasm of corpus uteri, except isthmus", "endometrium", None, 1.0),),
        histologies=(H("endometrioid adenocarcinoma", "8380/3", 0.8), H("serous carcinoma", "8441/3", 0.1, ("high_grade",)),
                     H("clear cell carcinoma", "8310/3", 0.03, ("high_grade",)), H("carcinosarcoma", "8980/3", 0.07, ("high_grade",))),
        female_share=1.0, age_median=67.1, age_q1=58.3, age_q3=74.0, weight=0.045,
        risk_factors=(("obesity", 3.2), ("endometrial_hyperplasia", 8.0), ("pcos", 2.5), ("diabetes", 1.7), ("hormone_therapy", 1.8)),
        signals=(S("postmenopausal_bleeding", 0.68, 60, 0.35, 0.6), S("abnormal_uterine_bleeding", 0.25, 120, 0.55), S("endometrial_hyperplasia", 0.15, 250, 0.65),
                 S("pelvic_pain", 0.12, 60, 0.25)),
        drifts=(LD("hgb", 0.12, -1.0, 90),),
        workup=(WorkupPath("bleeding", 1.0, (Step(30, 90, (), dx=("postmenopausal_bleeding",)),
                                              Step(15, 29, ("us_transvaginal",), dx=("postmenopausal_bleeding",), note="RADIOLOGY"),
                                              Step(2, 14, ("endometrial_biopsy", "surgical_path"), dx=("postmenopausal_bleeding",), note="PATHOLOGY"))),),
        staging=(Step(5, 25, ("ct_abd_pelvis",), note="RADIOLOGY"),),
        stage_system="FIGO 2009", stage_weights=(0.68, 0.1, 0.14, 0.08),
        stage_options=(_stages("T1a N0 M0 IA 3; T1b N0 M0 IB 1"), _stages("T2 N0 M0 II 1"), _stages("T3a N0 M0 IIIA 0.5; T1b N1 M0 IIIC1 1; T2 N2 M0 IIIC2 0.5"),
                       _stages("T4 N1 M0 IVA 0.3; T3 N1 M1 IVB 1")),
        p_recurrence=(0.08, 0.18, 0.35), metastatic_os_months=20, history_dx="hx_uterine_cancer",
        metastasis_dx=("mets_peritoneum", "mets_lung", "mets_nodes_abdominal")),
    CancerProfile(
        key="gastric", name="Gastric cancer", icd10_prefixes=("C16",), icd9_prefixes=("151",),
        sites=(CS("C16.9", "151.9", "Malignant neoplasm of stomach, unspecified site", "stomach", None, 0.5),
               CS("C16.0", "151.0", "Malignant neoplasm of cardia", "gastric cardia", None, 0.25),
               CS("C16.3", "151.2", "Malignant neoplasm of pyloric antrum", "gastric antrum", None, 0.25)),
        histologies=(H("adenocarcinoma, intestinal type", "8144/3", 0.5), H("adenocarcinoma, diffuse type", "8145/3", 0.3),
                     H("signet ring cell carcinoma", "8490/3", 0.15), H("adenocarcinoma", "8140/3", 0.05)),
        female_share=0.462, age_median=69.0, age_q1=58.5, age_q3=76.9, weight=0.035,
        risk_factors=(("h_pylori", 5.0), ("atrophic_gastritis", 3.0), (SMOKING, 1.6), ("fh_digestive", 2.0), ("alcohol", 1.2), ("gerd", 1.5)),
        signals=(S("epigastric_pain", 0.35, 120, 0.6, 0.6), S("dyspepsia", 0.25, 180, 0.65), S("iron_deficiency_anemia", 0.28, 120, 0.5),
                 S("gerd", 0.2, 365, 0.6), S("weight_loss", 0.3, 60, 0.25),
                 S("nausea_vomiting", 0.2, 60, 0.25), S("early_satiety", 0.15, 45), S("melena", 0.1, 30), S("dysphagia", 0.08, 45)),
        drifts=(LD("hgb", 0.45, -2.4, 200, 0.25), LD("mcv", 0.3, -7.0, 200, 0.25), LD("bmi", 0.35, -2.2, 120, 0.1), LD("albumin", 0.2, -0.5, 90)),
        workup=(WorkupPath("dyspepsia", 1.0, (Step(30, 100, (), dx=("epigastric_pain",), labs=("cbc",)),
                                               Step(3, 29, ("egd_biopsy", "surgical_path"), dx=("epigastric_pain",), note="PATHOLOGY"))),),
        staging=(Step(4, 21, ("ct_abd_pelvis",), note="RADIOLOGY"), Step(7, 28, ("pet_ct",), note="RADIOLOGY")),
        stage_system="AJCC 8th", stage_weights=(0.25, 0.2, 0.2, 0.35),
        stage_options=(_stages("T1b N0 M0 IA 1; T2 N0 M0 IB 1"), _stages("T3 N0 M0 IIA 1; T2 N1 M0 IIA 1; T4a N0 M0 IIB 0.5"),
                       _stages("T3 N2 M0 IIIA 1; T4a N2 M0 IIIB 1; T4b N3a M0 IIIC 0.5"), _stages("T3 N2 M1 IV 1")),
        p_recurrence=(0.15, 0.35, 0.55), metastatic_os_months=11, history_dx="hx_gastric_cancer",
        metastasis_dx=("mets_liver", "mets_peritoneum", "mets_nodes_abdominal"), markers=("cea",)),
    CancerProfile(
        key="ovarian", name="Ovarian cancer", icd10_prefixes=("C56",), icd9_prefixes=("183",),
        sites=(CS("C56.1", "183.0", "Malignant neoplasm of ovary", "right ovary", "right", 0.4), CS("C56.2", "183.0", "Malignant neoplasm of ovary", "left ovary", "left", 0.4),
               CS("C56.9", "183.0", "Malignant neoplasm of ovary", "ovary", None, 0.2)),
        histologies=(H("high-grade serous carcinoma", "8461/3", 0.7), H("endometrioid carcinoma", "8380/3", 0.1), H("clear cell carcinoma", "8310/3", 0.08),
                     H("mucinous carcinoma", "8480/3", 0.05), H("low-grade serous carcinoma", "8460/3", 0.07)),
        female_share=1.0, age_median=63.8, age_q1=52.9, age_q3=73.2, weight=0.035,
        risk_factors=(("brca", 15.0), ("fh_ovary", 3.0), ("fh_breast", 1.5), ("endometriosis", 1.5)),
        signals=(S("bloating", 0.42, 60, 0.6, 0.6), S("pelvic_pain", 0.36, 90, 0.6), S("abdominal_pain", 0.28, 60, 0.55), S("ascites", 0.2, 20),
                 S("early_satiety", 0.15, 45, 0.3), S("urinary_frequency", 0.2, 90, 0.55), S("ovarian_cyst", 0.22, 200, 0.65), S("fatigue", 0.2, 60, 0.45),
                 S("constipation", 0.15, 90, 0.5)),
        drifts=(LD("ca125", 0.8, 2.6, 90, 0.05), LD("hgb", 0.15, -1.0, 90), LD("plt", 0.2, 90.0, 90)),
        workup=(WorkupPath("symptomatic", 1.0, (Step(30, 80, (), dx=("bloating", "pelvic_pain")),
                                                 Step(15, 29, ("us_transvaginal",), dx=("pelvic_pain",), labs=("ca125",), note="RADIOLOGY"),
                                                 Step(5, 14, ("ct_abd_pelvis",), dx=("pelvic_pain",), note="RADIOLOGY"),
                                                 Step(1, 4, ("paracentesis", "surgical_path"), dx=("ascites",), note="PATHOLOGY"))),),
        staging=(Step(3, 20, ("ct_chest_contrast",), note="RADIOLOGY"),),
        stage_system="FIGO 2014", stage_weights=(0.2, 0.08, 0.5, 0.22),
        stage_options=(_stages("T1a N0 M0 IA 1; T1c N0 M0 IC 1"), _stages("T2a N0 M0 IIA 0.5; T2b N0 M0 IIB 1"),
                       _stages("T3a N0 M0 IIIA2 0.5; T3b N0 M0 IIIB 1; T3c N1 M0 IIIC 3"), _stages("T3c N1 M1a IVA 1; T3c N1 M1b IVB 1")),
        p_recurrence=(0.15, 0.35, 0.7), metastatic_os_months=30, history_dx="hx_ovarian_cancer",
        metastasis_dx=("mets_peritoneum", "mets_liver", "mets_nodes_abdominal"), markers=("ca125",)),
    CancerProfile(
        key="pancreatic", name="Pancreatic cancer", icd10_prefixes=("C25",), icd9_prefixes=("157",),
        sites=(CS("C25.0", "157.0", "Malignant neoplasm of head of pancreas", "head of the pancreas", None, 0.65),
               CS("C25.1", "157.1", "Malignant neoplasm of body of pancreas", "body of the pancreas", None, 0.2),
               CS("C25.2", "157.2", "Malignant neoplasm of tail of pancreas", "tail of the pancreas", None, 0.15)),
        histologies=(H("ductal adenocarcinoma", "8500/3", 0.92), H("acinar cell carcinoma", "8550/3", 0.03), H("adenosquamous carcinoma", "8560/3", 0.05)),
        female_share=0.502, age_median=71.3, age_q1=64.2, age_q3=79.1, weight=0.05,
        risk_factors=((SMOKING, 2.2), ("diabetes", 2.0), ("chronic_pancreatitis", 8.0), ("obesity", 1.5), ("fh_digestive", 2.0), ("brca", 2.5), ("alcohol", 1.4)),
        signals=(S("diabetes", 0.4, 300, 0.65, 0.8), S("weight_loss", 0.42, 120, 0.45), S("abdominal_pain", 0.42, 60, 0.45), S("epigastric_pain", 0.22, 60, 0.45),
                 S("back_pain", 0.25, 90, 0.5), S("jaundice", 0.28, 20), S("pruritus", 0.1, 25), S("nausea", 0.2, 45, 0.3),
                 S("acute_pancreatitis", 0.1, 120, 0.45), S("depression", 0.1, 300, 0.5), S("dyspepsia", 0.15, 180, 0.5)),
        drifts=(LD("glucose", 0.38, 60.0, 360, 0.45), LD("a1c", 0.35, 1.8, 360, 0.45), LD("bilirubin", 0.35, 2.2, 30), LD("alp", 0.35, 1.4, 40),
                LD("bmi", 0.45, -2.8, 180, 0.15), LD("ca199", 0.7, 3.2, 90)),
        workup=(WorkupPath("symptomatic", 1.0, (Step(20, 60, (), dx=("abdominal_pain", "weight_loss"), labs=("cmp",)),
                                                 Step(10, 19, ("ct_abdomen",), dx=("abdominal_pain",), labs=("ca199",), note="RADIOLOGY"),
                                                 Step(2, 9, ("eus_fna", "surgical_path"), dx=("abdominal_pain",), note="PATHOLOGY"))),),
        staging=(Step(3, 20, ("ct_chest_contrast",), note="RADIOLOGY"),),
        stage_system="AJCC 8th", stage_weights=(0.1, 0.22, 0.15, 0.53),
        stage_options=(_stages("T1c N0 M0 IA 1; T2 N0 M0 IB 1"), _stages("T3 N0 M0 IIA 1; T2 N1 M0 IIB 1"), _stages("T4 N0 M0 III 1; T2 N2 M0 III 1"),
                       _stages("T3 N1 M1 IV 1")),
        p_recurrence=(0.55, 0.7, 0.85), metastatic_os_months=7, history_dx="hx_pancreatic_cancer",
        metastasis_dx=("mets_liver", "mets_peritoneum", "mets_lung"), markers=("ca199",)),
    CancerProfile(
        key="liver", name="Liver cancer", icd10_prefixes=("C22",), icd9_prefixes=("155",),
        sites=(CS("C22.0", "155.0", "Malignant neoplasm of liver, primary", "liver", None, 0.85, ("hepatocellular carcinoma",)),
               CS("C22.1", "155.1", "Malignant neoplasm of intrahepatic bile ducts", "intrahepatic bile ducts", None, 0.15, ("intrahepatic cholangiocarcinoma",))),
        histologies=(H("hepatocellular carcinoma", "8170/3", 0.85, ("hcc",)), H("intrahepatic cholangiocarcinoma", "8160/3", 0.15, ("cholangio",))),
        female_share=0.348, age_median=68.9, age_q1=63.3, age_q3=75.8, weight=0.04,
        risk_factors=(("cirrhosis", 40.0), ("hepatitis_b", 10.0), ("hepatitis_c", 8.0), ("alcohol", 2.5), ("nafld", 2.5), ("diabetes", 1.8),
                      ("hemochromatosis", 5.0), ("obesity", 1.5), (SMOKING, 1.4)),
        signals=(S("ruq_pain", 0.3, 60, 0.15), S("ascites", 0.2, 45, 0.2), S("jaundice", 0.15, 30), S("weight_loss", 0.25, 90, 0.18), S("hepatomegaly", 0.1, 60),
                 S("thrombocytopenia", 0.2, 240, 0.45), S("elevated_liver_enzymes", 0.3, 200, 0.45), S("abnormal_afp", 0.25, 120, 0.25), S("fatigue", 0.2, 90, 0.2)),
        drifts=(LD("afp", 0.6, 3.2, 300, 0.3), LD("alt", 0.3, 0.6, 200, 0.25), LD("ast", 0.3, 0.7, 200, 0.25), LD("albumin", 0.3, -0.6, 150, 0.15),
                LD("bilirubin", 0.2, 0.8, 90), LD("plt", 0.3, -60.0, 300, 0.3)),
        workup=(WorkupPath("surveillance", 0.5, (Step(40, 100, ("us_abdomen",), dx=("hepatomegaly",), labs=("afp", "hepatic"), note="RADIOLOGY"),
                                                  Step(10, 39, ("mri_abdomen",), dx=("hepatomegaly",), note="RADIOLOGY"),
                                                  Step(2, 9, ("liver_biopsy", "surgical_path"), dx=("hepatomegaly",), note="PATHOLOGY"))),
                WorkupPath("symptomatic", 0.5, (Step(30, 80, (), dx=("ruq_pain",), labs=("cmp", "cbc")),
                                                 Step(10, 29, ("ct_abdomen",), dx=("ruq_pain",), labs=("afp",), note="RADIOLOGY"),
                                                 Step(2, 9, ("liver_biopsy", "surgical_path"), dx=("ruq_pain",), note="PATHOLOGY")))),
        staging=(Step(3, 20, ("ct_chest_contrast",), note="RADIOLOGY"),),
        stage_system="AJCC 8th", stage_weights=(0.3, 0.25, 0.25, 0.2),
        stage_options=(_stages("T1a N0 M0 IA 1; T1b N0 M0 IB 1"), _stages("T2 N0 M0 II 1"), _stages("T3 N0 M0 IIIA 1; T4 N0 M0 IIIB 1"),
                       _stages("T3 N1 M0 IVA 0.5; T4 N0 M1 IVB 1")),
        p_recurrence=(0.5, 0.65, 0.8), metastatic_os_months=8, history_dx="hx_liver_cancer",
        metastasis_dx=("mets_lung", "mets_bone", "mets_nodes_abdominal"), markers=("afp",)),
    CancerProfile(
        key="leukemia", name="Leukemia", icd10_prefixes=("C91", "C92", "C93", "C94", "C95"), icd9_prefixes=("204", "205", "206", "207", "208"),
        sites=(CS("C91.10", "204.10", "Chronic lymphoid leukemia, without mention of having achieved remission", "blood and bone marrow", None, 0.42,
                  ("chronic lymphocytic leukemia",)),
               CS("C92.00", "205.00", "Acute myeloid leukemia, without mention of having achieved remission", "blood and bone marrow", None, 0.3,
                  ("acute myeloid leukemia",)),
               CS("C92.10", "205.10", "Chronic myeloid leukemia, without mention of having achieved remission", "blood and bone marrow", None, 0.14,
                  ("chronic myeloid leukemia",)),
               CS("C91.00", "204.00", "Acute lymphoid leukemia, without mention of having achieved remission", "blood and bone marrow", None, 0.05,
                  ("acute lymphoblastic leukemia",)),
               CS("C93.10", "206.10", "Chronic monocytic leukemia, without mention of having achieved remission", "blood and bone marrow", None, 0.09,
                  ("chronic myelomonocytic leukemia",))),
        histologies=(H("chronic lymphocytic leukemia", "9823/3", 0.42, ("cll",)), H("acute myeloid leukemia", "9861/3", 0.3, ("aml",)),
                     H("chronic myeloid leukemia", "9875/3", 0.14, ("cml",)), H("acute lymphoblastic leukemia", "9811/3", 0.05, ("all",)),
                     H("chronic myelomonocytic leukemia", "9945/3", 0.09, ("cmml",))),
        female_share=0.41, age_median=72.6, age_q1=62.6, age_q3=78.6, weight=0.045,
        risk_factors=(("mds", 10.0), (SMOKING, 1.4), ("fh_leukemia", 2.0)),
        signals=(S("fatigue", 0.32, 90, 0.25), S("anemia", 0.32, 200, 0.4), S("thrombocytopenia", 0.22, 200, 0.4), S("leukocytosis", 0.28, 300, 0.55, 0.6),
                 S("lymphocytosis", 0.18, 400, 0.65, 0.6), S("neutropenia", 0.08, 90, 0.2), S("easy_bruising", 0.1, 30), S("fever", 0.12, 30),
                 S("night_sweats", 0.08, 60), S("splenomegaly", 0.08, 90, 0.2), S("generalized_lymphadenopathy", 0.1, 120, 0.25), S("pneumonia", 0.1, 120, 0.2)),
        drifts=(LD("wbc", 0.45, 1.2, 400, 0.45), LD("lymph", 0.35, 1.5, 500, 0.5), LD("hgb", 0.45, -2.2, 200, 0.25), LD("plt", 0.4, -110.0, 200, 0.25),
                LD("ldh", 0.25, 0.5, 90)),
        workup=(WorkupPath("cytopenia", 1.0, (Step(15, 120, (), dx=("fatigue",), labs=("cbc",)),
                                               Step(5, 14, ("flow_cytometry",), dx=("leukocytosis",), labs=("cbc", "cmp", "ldh")),
                                               Step(1, 4, ("bone_marrow_biopsy", "surgical_path"), dx=("leukocytosis",), note="PATHOLOGY"))),),
        staging=(),
        stage_system="risk group", stage_weights=(0.35, 0.35, 0.2, 0.1),
        stage_options=(_stages("- - - low-risk"), _stages("- - - intermediate-risk"), _stages("- - - high-risk"), _stages("- - - very-high-risk")),
        p_recurrence=(0.3, 0.5, 0.7), metastatic_os_months=14, history_dx="hx_leukemia", metastasis_dx=()),
    CancerProfile(
        key="myeloma", name="Multiple myeloma", icd10_prefixes=("C90.0",), icd9_prefixes=("203.0",),
        sites=(CS("C90.00", "203.00", "Multiple myeloma, without mention of having achieved remission", "bone marrow", None, 1.0),),
        histologies=(H("plasma cell myeloma", "9732/3", 1.0),),
        female_share=0.476, age_median=72.3, age_q1=64.6, age_q3=78.5, weight=0.035,
        risk_factors=(("mgus", 25.0), (BLACK_RACE, 2.0), ("fh_lymphoid", 2.0), ("obesity", 1.3)),
        signals=(S("back_pain", 0.35, 180, 0.3, 0.7), S("anemia", 0.42, 240, 0.45), S("hypercalcemia", 0.14, 60), S("ckd", 0.2, 300, 0.5),
                 S("aki", 0.12, 45), S("fatigue", 0.25, 120, 0.25), S("proteinuria", 0.14, 300, 0.45), S("osteoporosis", 0.1, 400, 0.6), S("pneumonia", 0.1, 150, 0.25)),
        drifts=(LD("protein", 0.55, 2.0, 500, 0.5), LD("albumin", 0.35, -0.6, 300, 0.3), LD("hgb", 0.5, -2.3, 300, 0.3), LD("creatinine", 0.3, 0.8, 240, 0.3),
                LD("calcium", 0.2, 1.4, 60)),
        workup=(WorkupPath("symptomatic", 1.0, (Step(30, 120, (), dx=("back_pain", "anemia"), labs=("cbc", "cmp")),
                                                 Step(10, 29, ("spep",), dx=("anemia",), labs=("cmp",)),
                                                 Step(2, 9, ("bone_marrow_biopsy", "surgical_path"), dx=("anemia",), note="PATHOLOGY"))),),
        staging=(Step(5, 25, ("skeletal_survey",), note="RADIOLOGY"),),
        stage_system="R-ISS", stage_weights=(0.28, 0.57, 0.15, 0.0),
        stage_options=(_stages("- - - I"), _stages("- - - II"), _stages("- - - III"), _stages("- - - III")),
        p_recurrence=(0.9, 0.95, 1.0), metastatic_os_months=60, history_dx="hx_lymphoma", metastasis_dx=()),
    CancerProfile(
        key="lymphoma", name="Lymphoma", icd10_prefixes=("C81", "C82", "C83", "C84", "C85", "C86", "C88"), icd9_prefixes=("200", "201", "202"),
        sites=(CS("C83.30", "200.70", "Large cell lymphoma, unspecified site, extranodal and solid organ sites", "lymph nodes", None, 0.4,
                  ("diffuse large B-cell lymphoma",)),
               CS("C82.90", "202.00", "Nodular lymphoma, unspecified site, extranodal and solid organ sites", "lymph nodes", None, 0.22, ("follicular lymphoma",)),
               CS("C81.90", "201.90", "Hodgkin's disease, unspecified type, unspecified site", "lymph nodes", None, 0.12, ("classical Hodgkin lymphoma",)),
               CS("C83.10", "200.40", "Mantle cell lymphoma, unspecified site, extranodal and solid organ sites", "lymph nodes", None, 0.06, ("mantle cell lymphoma",)),
               CS("C85.90", "202.80", "Other malignant lymphomas, unspecified site, extranodal and solid organ sites", "lymph nodes", None, 0.2,
                  ("marginal zone lymphoma",))),
        histologies=(H("diffuse large B-cell lymphoma", "9680/3", 0.4, ("dlbcl",)), H("follicular lymphoma", "9690/3", 0.22, ("follicular",)),
                     H("classical Hodgkin lymphoma", "9650/3", 0.12, ("hodgkin",)), H("mantle cell lymphoma", "9673/3", 0.06, ("mantle",)),
                     H("marginal zone lymphoma", "9699/3", 0.2, ("mzl",))),
        female_share=0.458, age_median=70.3, age_q1=59.7, age_q3=78.2, weight=0.05,
        risk_factors=(("hiv", 8.0), ("rheumatoid_arthritis", 3.0), ("kidney_transplant", 6.0), ("hepatitis_c", 2.5), ("fh_lymphoid", 3.0)),
        signals=(S("lymphadenopathy", 0.5, 90, 0.6, 1.0), S("generalized_lymphadenopathy", 0.25, 60, 0.4), S("night_sweats", 0.25, 90, 0.5),
                 S("fever", 0.15, 60, 0.35), S("weight_loss", 0.22, 90, 0.35), S("fatigue", 0.3, 120, 0.45), S("splenomegaly", 0.12, 90, 0.45),
                 S("pruritus", 0.15, 180, 0.55), S("anemia", 0.2, 200, 0.35), S("pneumonia", 0.1, 150, 0.3)),
        drifts=(LD("ldh", 0.45, 0.7, 120, 0.1), LD("hgb", 0.25, -1.4, 150, 0.15), LD("lymph", 0.2, -0.6, 150, 0.1), LD("crp", 0.25, 1.2, 120)),
        workup=(WorkupPath("adenopathy", 1.0, (Step(20, 80, (), dx=("lymphadenopathy",), labs=("cbc", "ldh")),
                                                Step(10, 19, ("ct_chest_contrast", "ct_abd_pelvis"), dx=("lymphadenopathy",), note="RADIOLOGY"),
                                                Step(2, 9, ("lymph_node_biopsy", "surgical_path", "flow_cytometry"), dx=("lymphadenopathy",), note="PATHOLOGY"))),),
        staging=(Step(3, 20, ("pet_ct",), note="RADIOLOGY"),),
        stage_system="Ann Arbor", stage_weights=(0.15, 0.2, 0.25, 0.4),
        stage_options=(_stages("- - - IA 2; - - - IB 1"), _stages("- - - IIA 2; - - - IIB 1"), _stages("- - - IIIA 1; - - - IIIB 1"), _stages("- - - IVA 1; - - - IVB 1")),
        p_recurrence=(0.15, 0.25, 0.35), metastatic_os_months=60, history_dx="hx_lymphoma", metastasis_dx=()),
)
del S, LD, H, CS

CANCERS: dict[str, CancerProfile] = {p.key: p for p in PROFILES}
CANCER_KEYS: tuple[str, ...] = tuple(p.key for p in PROFILES)

CANCER_CODE_PREFIXES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    p.key: (p.icd10_prefixes, p.icd9_prefixes) for p in PROFILES
}
"""cancer key -> (ICD-10-CM prefixes, ICD-9-CM prefixes) that count as a code of that cancer for the phenotype."""


def cancer_of_code(code: str) -> str | None:
    """The cancer a MEDS diagnosis code belongs to under the phenotype's code lists, or None."""
    vocab, _, value = code.partition(schema.SEP)
    if vocab == schema.ICD10CM:
        which = 0
    elif vocab == schema.ICD9CM:
        which = 1
    else:
        return None
    for key, prefixes in CANCER_CODE_PREFIXES.items():
        if any(value.startswith(p) for p in prefixes[which]):
            return key
    return None


def _check() -> None:
    total = sum(p.weight for p in PROFILES)
    if abs(total - 1.0) > 0.05:
        raise ValueError(f"cancer weights sum to {total}")
    for p in PROFILES:
        for key, _ in p.risk_factors:
            if key not in CONDITIONS and key not in (SMOKING, CURRENT_SMOKING, BLACK_RACE):
                raise ValueError(f"{p.key}: unknown risk factor {key!r}")
        check_known(p.key, "signal diagnosis", (s.dx for s in p.signals), DX)
        check_known(p.key, "drifting lab", (d.lab for d in p.drifts), LABS)
        hist_names = {h.name for h in p.histologies}
        for site in p.sites:
            if not any(site.icd10.startswith(pre) for pre in p.icd10_prefixes):
                raise ValueError(f"{p.key}: site code {site.icd10} outside its prefixes")
            if not any(site.icd9.startswith(pre) for pre in p.icd9_prefixes):
                raise ValueError(f"{p.key}: ICD-9 code {site.icd9} outside its prefixes")
            if not set(site.histologies) <= hist_names:
                raise ValueError(f"{p.key}: site {site.icd10} names unknown histologies")
        for path in p.workup:
            for step in (*path.steps, *p.staging):
                check_known(p.key, "procedure", (*step.procedures, *step.choice), PROCEDURES)
                check_known(p.key, "work-up diagnosis", step.dx, DX)
        check_known(p.key, "diagnosis", (p.history_dx, *p.metastasis_dx), DX)


_check()
