"""Why background visits happen: acute complaints with their weights per setting, and what each one triggers.

Every complaint is a diagnosis code with relative weights in ambulatory (AMB), emergency (ED) and inpatient (IMP)
visits, optional sex/age/condition restrictions, same-visit procedures, medications and lab panels, and follow-up
procedure visits (e.g. rectal bleeding -> colonoscopy weeks later) whose reports are mostly benign. Cancer signals
reuse the same table, so a case's cough brings the same chest X-ray a control's cough would.

>>> REASONS[REASON_INDEX["cough"]].amb > 0
True
"""

from __future__ import annotations

from dataclasses import dataclass

from vista.shared.synth.catalog import DX, MEDS, PANELS, PROCEDURES, check_known
from vista.shared.synth.conditions import CONDITIONS


@dataclass(frozen=True, slots=True)
class FollowUp:
    """A procedure visit ``lo``-``hi`` days after the complaint, done with probability ``p``."""

    procedures: tuple[str, ...]
    p: float
    lo: int
    hi: int
    note: str | None = None


@dataclass(frozen=True, slots=True)
class Reason:
    """An acute reason for a visit and what it brings with it."""

    dx: str
    amb: float = 0.0
    ed: float = 0.0
    imp: float = 0.0
    sex: str | None = None
    min_age: float = 0.0
    max_age: float = 200.0
    requires: str | None = None
    procedures: tuple[tuple[str, float], ...] = ()
    meds: tuple[tuple[str, float], ...] = ()
    panels: tuple[tuple[str, float], ...] = ()
    followups: tuple[FollowUp, ...] = ()
    note: str | None = None


R = Reason
F = FollowUp
_BASIC = (("cbc", 0.5), ("cmp", 0.4))
_ED_LABS = (("cbc", 0.85), ("cmp", 0.8))
_IMP_LABS = (("cbc", 1.0), ("cmp", 1.0))

REASONS: tuple[Reason, ...] = (
    R("uri", 9, 2, meds=(("guaifenesin", 0.3),)),
    R("sinusitis", 5, 0.5, meds=(("amoxicillin", 0.6), ("azithromycin", 0.2))),
    R("bronchitis", 3, 1, procedures=(("chest_xray", 0.15),), meds=(("azithromycin", 0.4), ("albuterol", 0.2)), note="RADIOLOGY"),
    R("pharyngitis", 2, 0.5, meds=(("amoxicillin", 0.4),)),
    R("uti", 4.5, 4, 5, procedures=(("urinalysis", 0.9),), meds=(("nitrofurantoin", 0.5), ("ciprofloxacin", 0.3))),
    R("back_pain", 4, 4, meds=(("ibuprofen", 0.3), ("cyclobenzaprine", 0.3))),
    R("low_back_pain", 3, 2, meds=(("naproxen", 0.3), ("cyclobenzaprine", 0.2))),
    R("lumbar_strain", 0.5, 3, meds=(("cyclobenzaprine", 0.5),)),
    R("abdominal_pain", 3, 12, 5, panels=_BASIC, procedures=(("ct_abd_pelvis", 0.1), ("us_abdomen", 0.06)), note="RADIOLOGY",
      followups=(F(("colonoscopy",), 0.04, 14, 90, "PATHOLOGY"),)),
    R("epigastric_pain", 1.5, 2, meds=(("omeprazole", 0.4),), panels=(("cbc", 0.2),), followups=(F(("egd_biopsy", "surgical_path"), 0.06, 14, 90, "PATHOLOGY"),)),
    R("cough", 5, 3, procedures=(("chest_xray", 0.2),), meds=(("guaifenesin", 0.3),), note="RADIOLOGY",
      followups=(F(("ct_chest",), 0.03, 7, 60, "RADIOLOGY"),)),
    R("fatigue", 3, 1, panels=(("cbc", 0.7), ("cmp", 0.5), ("tsh", 0.5), ("ferritin", 0.2))),
    R("headache", 2, 5, meds=(("ibuprofen", 0.3),)),
    R("knee_pain", 3, 2, meds=(("naproxen", 0.3),)),
    R("dizziness", 1.5, 4, procedures=(("ecg", 0.3),), panels=(("bmp", 0.3),)),
    R("cellulitis", 1.5, 3, 6, meds=(("cephalexin", 0.8),)),
    R("constipation", 1.5, 1, meds=(("docusate", 0.4),)),
    R("diarrhea", 1.5, 1.5),
    R("chest_pain", 2, 12, 6, procedures=(("ecg", 0.7), ("chest_xray", 0.4)), panels=(("cbc", 0.5), ("bmp", 0.5)), note="RADIOLOGY"),
    R("chest_wall_pain", 0.5, 1),
    R("dyspnea", 1.5, 4, procedures=(("chest_xray", 0.5), ("ecg", 0.3), ("spirometry", 0.1)), note="RADIOLOGY"),
    R("weight_loss", 0.5, panels=(("cbc", 0.6), ("cmp", 0.6), ("tsh", 0.5))),
    R("anorexia", 0.2),
    R("nausea", 1, 1, meds=(("ondansetron", 0.4),)),
    R("nausea_vomiting", 0.5, 4, meds=(("ondansetron", 0.6),), panels=(("bmp", 0.5),)),
    R("anemia", 1, 0.5, 2, panels=(("cbc", 0.95), ("ferritin", 0.5)), followups=(F(("colonoscopy",), 0.05, 14, 90, "PATHOLOGY"),)),
    R("iron_deficiency_anemia", 0.5, panels=(("cbc", 0.95), ("ferritin", 0.8)),
      followups=(F(("colonoscopy",), 0.2, 14, 90, "PATHOLOGY"), F(("egd_biopsy", "surgical_path"), 0.1, 14, 90, "PATHOLOGY"))),
    R("hematuria", 0.8, 0.5, procedures=(("urinalysis", 0.9),), followups=(F(("ct_urogram",), 0.15, 7, 60, "RADIOLOGY"), F(("cystoscopy",), 0.1, 14, 90))),
    R("gross_hematuria", 0.1, 0.5, procedures=(("urinalysis", 0.9),), followups=(F(("cystoscopy",), 0.3, 7, 45),)),
    R("rectal_bleeding", 0.6, 1, 1, panels=(("cbc", 0.6),), followups=(F(("colonoscopy",), 0.25, 14, 90, "PATHOLOGY"),)),
    R("melena", 0.15, 0.5, 3, panels=(("cbc", 0.95),), followups=(F(("egd_biopsy", "surgical_path"), 0.3, 1, 14, "PATHOLOGY"),)),
    R("occult_blood", 0.3, followups=(F(("colonoscopy",), 0.5, 14, 120, "PATHOLOGY"),)),
    R("bowel_habit_change", 0.5, followups=(F(("colonoscopy",), 0.1, 14, 120, "PATHOLOGY"),)),
    R("dysphagia", 0.4, 0.2, followups=(F(("egd_biopsy", "surgical_path"), 0.3, 14, 90, "PATHOLOGY"),)),
    R("dyspepsia", 1, meds=(("omeprazole", 0.4),), followups=(F(("egd_biopsy", "surgical_path"), 0.05, 14, 120, "PATHOLOGY"),)),
    R("gerd", 1, meds=(("omeprazole", 0.5),)),
    R("lymphadenopathy", 0.5, panels=(("cbc", 0.5),), followups=(F(("ct_chest_contrast",), 0.05, 7, 60, "RADIOLOGY"),)),
    R("generalized_lymphadenopathy", 0.1, panels=(("cbc", 0.8),)),
    R("fever", 1, 3, panels=(("cbc", 0.6),)),
    R("night_sweats", 0.2, panels=(("cbc", 0.4),)),
    R("pruritus", 0.8),
    R("bloating", 0.8),
    R("early_satiety", 0.1),
    R("hemoptysis", 0.15, 0.3, procedures=(("chest_xray", 0.7),), note="RADIOLOGY", followups=(F(("ct_chest",), 0.25, 7, 45, "RADIOLOGY"),)),
    R("hoarseness", 0.4),
    R("lung_nodule", 0.3, procedures=(("ct_chest", 0.6),), note="RADIOLOGY", followups=(F(("ct_chest",), 0.35, 90, 200, "RADIOLOGY"),)),
    R("abnormal_lung_imaging", 0.1, followups=(F(("ct_chest",), 0.5, 14, 90, "RADIOLOGY"),)),
    R("pelvic_pain", 1, 1, sex="F", followups=(F(("us_pelvis",), 0.3, 3, 30, "RADIOLOGY"),)),
    R("abnormal_uterine_bleeding", 1, 0.3, sex="F", max_age=60, followups=(F(("us_transvaginal",), 0.3, 3, 30, "RADIOLOGY"),)),
    R("postmenopausal_bleeding", 0.3, sex="F", min_age=50,
      followups=(F(("us_transvaginal",), 0.6, 3, 30, "RADIOLOGY"), F(("endometrial_biopsy", "surgical_path"), 0.25, 7, 45, "PATHOLOGY"))),
    R("ovarian_cyst", 0.3, sex="F", max_age=70, followups=(F(("us_pelvis",), 0.5, 30, 90, "RADIOLOGY"),)),
    R("breast_lump", 0.6, sex="F", followups=(F(("mammo_diag", "us_breast"), 0.6, 3, 30, "RADIOLOGY"), F(("breast_biopsy", "surgical_path"), 0.1, 14, 45, "PATHOLOGY"))),
    R("mastodynia", 0.5, sex="F"),
    R("elevated_psa", 0.4, sex="M", min_age=45, panels=(("psa", 0.9),), followups=(F(("prostate_biopsy", "surgical_path"), 0.06, 30, 120, "PATHOLOGY"),)),
    R("nocturia", 0.8, sex="M", min_age=45),
    R("urinary_frequency", 1, procedures=(("urinalysis", 0.6),)),
    R("dysuria", 1, 1, procedures=(("urinalysis", 0.8),)),
    R("erectile_dysfunction", 0.6, sex="M", min_age=35),
    R("bph_luts", 0.8, sex="M", min_age=50, panels=(("psa", 0.4),), meds=(("tamsulosin", 0.4),)),
    R("easy_bruising", 0.2, panels=(("cbc", 0.7),)),
    R("thrombocytopenia", 0.2, panels=(("cbc", 0.95),)),
    R("leukocytosis", 0.2, panels=(("cbc", 0.95),)),
    R("lymphocytosis", 0.1, panels=(("cbc", 0.95),)),
    R("neutropenia", 0.1, panels=(("cbc", 0.95),)),
    R("hypercalcemia", 0.1, panels=(("cmp", 1.0),)),
    R("proteinuria", 0.3, procedures=(("urinalysis", 0.9),)),
    R("elevated_liver_enzymes", 0.5, panels=(("hepatic", 0.9),), followups=(F(("us_abdomen",), 0.3, 7, 60, "RADIOLOGY"),)),
    R("ruq_pain", 0.4, 1, procedures=(("us_abdomen", 0.5),), note="RADIOLOGY"),
    R("jaundice", 0.05, 0.2, panels=(("hepatic", 1.0),), procedures=(("us_abdomen", 0.6),), note="RADIOLOGY"),
    R("hepatomegaly", 0.05),
    R("splenomegaly", 0.05),
    R("ascites", 0.05, 0.1, procedures=(("us_abdomen", 0.4),), note="RADIOLOGY"),
    R("abnormal_afp", 0.03, panels=(("afp", 1.0), ("hepatic", 0.6))),
    R("hyperglycemia", 0.15, 0.2, panels=(("a1c", 0.6), ("bmp", 0.4))),
    R("pneumonia", 0.8, 4, 15, procedures=(("chest_xray", 0.85),), meds=(("levofloxacin", 0.3), ("azithromycin", 0.3), ("amoxicillin", 0.2)), note="RADIOLOGY"),
    R("copd_exacerbation", 0.6, 2, 8, requires="copd", procedures=(("chest_xray", 0.4),), meds=(("prednisone", 0.7), ("azithromycin", 0.4)), note="RADIOLOGY"),
    R("pap_ascus", 0.3, sex="F", min_age=21, max_age=65, followups=(F(("colposcopy_biopsy", "surgical_path"), 0.2, 14, 90, "PATHOLOGY"),)),
    R("hpv_positive", 0.2, sex="F", min_age=25, max_age=65),
    R("dvt", 0.2, 0.5, 2, meds=(("apixaban", 0.7),)),
    R("pulmonary_embolism", 0, 0.3, 3, procedures=(("ct_chest_contrast", 0.9),), meds=(("apixaban", 0.7),), note="RADIOLOGY"),
    R("acute_pancreatitis", 0, 0.5, 3, panels=(("cmp", 1.0),), procedures=(("ct_abdomen", 0.5),), note="RADIOLOGY"),
    R("aki", 0, 0.5, 6, panels=(("bmp", 1.0),)),
    R("sepsis", 0, 0.5, 8, meds=(("levofloxacin", 0.5),)),
    R("chf", 0, 1, 10, requires="chf", procedures=(("chest_xray", 0.6), ("echo", 0.3)), meds=(("furosemide", 0.8),), note="RADIOLOGY"),
    R("afib", 0, 1, 4, requires="afib", procedures=(("ecg", 0.9),)),
)
del R, F

REASON_INDEX: dict[str, int] = {r.dx: i for i, r in enumerate(REASONS)}


def _check() -> None:
    for r in REASONS:
        check_known("reason", "diagnosis", [r.dx], DX)
        owner = f"reason {r.dx}"
        check_known(owner, "condition", [r.requires] if r.requires is not None else [], CONDITIONS)
        check_known(owner, "procedure", (p for p, _ in r.procedures), PROCEDURES)
        check_known(owner, "medication", (m for m, _ in r.meds), MEDS)
        check_known(owner, "panel", (panel for panel, _ in r.panels), PANELS)
        check_known(owner, "follow-up procedure", (p for f in r.followups for p in f.procedures), PROCEDURES)


_check()
