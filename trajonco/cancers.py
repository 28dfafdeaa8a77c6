"""The 15 cancer types TrajOnco predicts, with the names and short hints the agent prompts use.

Keys are the snake_case names used across the project (cohort definitions, CLI, result files). The hints are a
handful of well-known risk factors and early signs per cancer; the paper's prompts carry no cancer-specific
knowledge, so the pipeline adds hints only when asked (`PipelineConfig.cancer_hints`).

>>> CANCERS["multiple_myeloma"].display_name
'multiple myeloma'
>>> get_cancer("Multiple Myeloma").key
'multiple_myeloma'
>>> [c.key for c in applicable_cancers("M")][:3]
['liver', 'lung', 'prostate']
>>> "ovarian" in {c.key for c in applicable_cancers("M")}
False
"""

from __future__ import annotations

from dataclasses import dataclass

from vista.shared.errors import UserError


class UnknownCancerError(ValueError, UserError):
    """A cancer name that is not one of the 15 types (the message lists the valid keys)."""


@dataclass(frozen=True, slots=True)
class CancerType:
    """One predicted cancer: its key, how prompts name it, the sexes it can occur in, and prompt hints."""

    key: str
    display_name: str
    sexes: frozenset[str]
    hints: tuple[str, ...]

    def applies_to(self, sex: str | None) -> bool:
        """Whether the cancer can occur in a patient of this sex (unknown sex: always)."""
        return sex is None or sex.upper() not in {"F", "M"} or sex.upper() in self.sexes


_BOTH = frozenset({"F", "M"})

_CATALOG: tuple[CancerType, ...] = (
    CancerType("liver", "liver cancer", _BOTH, (
        "cirrhosis or chronic hepatitis B/C", "heavy alcohol use", "fatty liver disease",
        "rising alpha-fetoprotein", "persistently abnormal liver enzymes or low platelets")),
    CancerType("lung", "lung cancer", _BOTH, (
        "current or former smoking (pack-years)", "COPD or emphysema", "pulmonary nodules on imaging",
        "persistent cough or hemoptysis", "unexplained weight loss or recurrent pneumonia")),
    CancerType("prostate", "prostate cancer", frozenset({"M"}), (
        "rising PSA", "lower urinary tract symptoms", "abnormal digital rectal exam",
        "family history of prostate cancer", "older age")),
    CancerType("breast", "breast cancer", _BOTH, (
        "breast lump or abnormal mammogram", "family history or BRCA variants", "long-term hormone therapy",
        "nipple discharge or skin changes", "prior atypical hyperplasia")),
    CancerType("bladder", "bladder cancer", _BOTH, (
        "visible or microscopic hematuria", "smoking", "recurrent urinary tract infections",
        "dysuria or urinary frequency without infection", "occupational chemical exposure")),
    CancerType("cervical", "cervical cancer", frozenset({"F"}), (
        "abnormal Pap test or positive high-risk HPV", "cervical intraepithelial neoplasia",
        "abnormal or postcoital vaginal bleeding", "overdue screening", "immunosuppression")),
    CancerType("esophageal", "esophageal cancer", _BOTH, (
        "difficulty swallowing", "long-standing reflux or Barrett's esophagus", "unexplained weight loss",
        "smoking and alcohol use", "iron-deficiency anemia")),
    CancerType("endometrial", "endometrial cancer", frozenset({"F"}), (
        "postmenopausal bleeding", "obesity", "thickened endometrium on ultrasound",
        "unopposed estrogen or tamoxifen", "diabetes or polycystic ovary syndrome")),
    CancerType("gastric", "gastric cancer", _BOTH, (
        "dyspepsia or epigastric pain", "Helicobacter pylori infection", "iron-deficiency anemia",
        "early satiety or weight loss", "upper gastrointestinal bleeding")),
    CancerType("ovarian", "ovarian cancer", frozenset({"F"}), (
        "abdominal bloating or distension", "pelvic or abdominal pain", "elevated CA-125",
        "adnexal mass on imaging", "family history or BRCA variants")),
    CancerType("pancreatic", "pancreatic cancer", _BOTH, (
        "new-onset diabetes in later life", "unexplained weight loss", "jaundice",
        "abdominal pain radiating to the back", "chronic pancreatitis or pancreatic cysts")),
    CancerType("colorectal", "colorectal cancer", _BOTH, (
        "rectal bleeding or positive stool blood test", "change in bowel habits", "iron-deficiency anemia",
        "colorectal polyps", "inflammatory bowel disease")),
    CancerType("leukemia", "leukemia", _BOTH, (
        "abnormal white cell count", "anemia or low platelets", "frequent infections",
        "easy bruising or bleeding", "enlarged spleen")),
    CancerType("multiple_myeloma", "multiple myeloma", _BOTH, (
        "anemia", "high calcium", "declining kidney function", "bone pain or fractures",
        "high total protein or known MGUS")),
    CancerType("lymphoma", "lymphoma", _BOTH, (
        "enlarged lymph nodes", "fevers, night sweats or weight loss", "elevated LDH",
        "immunosuppression", "enlarged spleen")),
)

CANCERS: dict[str, CancerType] = {c.key: c for c in _CATALOG}
"""The 15 cancer types by key, in a fixed order (the order the paper lists them)."""


ALIASES = {"myeloma": "multiple_myeloma"}
"""Other names of a cancer key (the synthetic generator's summary says ``myeloma``)."""


def get_cancer(name: str) -> CancerType:
    """The cancer for a key or display name (case, spaces, hyphens and a trailing 'cancer' ignored)."""
    norm = name.strip().lower().replace("-", " ").replace("_", " ")
    if norm.endswith(" cancer"):
        norm = norm[: -len(" cancer")]
    key = "_".join(norm.split())
    key = ALIASES.get(key, key)
    if key in CANCERS:
        return CANCERS[key]
    raise UnknownCancerError(f"unknown cancer type {name!r}; expected one of: {', '.join(CANCERS)}")


def applicable_cancers(sex: str | None) -> list[CancerType]:
    """The cancers that can occur in a patient of this sex (all 15 when the sex is unknown)."""
    return [c for c in _CATALOG if c.applies_to(sex)]
