"""The clinical vocabulary of the synthetic EHR: diagnoses (ICD-10-CM with their ICD-9-CM equivalents), LOINC labs
and vitals with units and adult distributions, RxNorm ingredients, CPT/HCPCS procedures and SNOMED observations.

Everything the generator writes comes from these tables, so `metadata/codes.parquet` can describe every code.
Concepts are referred to by a short key (``DX["cough"]``); the full MEDS code is ``<VOCAB>//<code>``.
ICD-10-CM descriptions come from `simple-icd-10-cm` (see `vista.shared.synth.vocabulary`); the ICD-9-CM, LOINC, RxNorm,
CPT/HCPCS and SNOMED names below are short descriptions written for this project.

>>> DX["cough"].icd10, DX["cough"].icd9
('R05.9', '786.2')
>>> LABS["hgb"].code, LABS["hgb"].unit
('LOINC//718-7', 'g/dL')
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import date

from vista.shared.meds import schema

ICD10_START = date(2015, 10, 1)
"""US claims switched from ICD-9-CM to ICD-10-CM on this date: earlier diagnoses are written in ICD-9-CM."""


@dataclass(frozen=True, slots=True)
class Diagnosis:
    """One diagnosis concept: its ICD-10-CM code, the ICD-9-CM code used before `ICD10_START`, and a note phrase."""

    key: str
    icd10: str
    icd9: str
    icd9_description: str
    phrase: str

    @property
    def code(self) -> str:
        return f"{schema.ICD10CM}{schema.SEP}{self.icd10}"

    @property
    def icd9_code(self) -> str:
        return f"{schema.ICD9CM}{schema.SEP}{self.icd9}"


@dataclass(frozen=True, slots=True)
class Lab:
    """A LOINC measurement with its unit and an adult distribution.

    Values are ``baseline + effects + noise``; for ``log=True`` labs the arithmetic happens on the natural log
    (means are then medians and the standard deviations are in log units).
    """

    key: str
    loinc: str
    name: str
    unit: str
    phrase: str
    mean_f: float
    mean_m: float
    sd_between: float
    sd_within: float
    low: float
    high: float
    decimals: int
    ref_low: float | None = None
    ref_high: float | None = None
    log: bool = False

    @property
    def code(self) -> str:
        return f"{schema.LOINC}{schema.SEP}{self.loinc}"


@dataclass(frozen=True, slots=True)
class Medication:
    """An RxNorm ingredient (RXCUI) and its name."""

    key: str
    rxcui: str
    name: str

    @property
    def code(self) -> str:
        return f"{schema.RXNORM}{schema.SEP}{self.rxcui}"


@dataclass(frozen=True, slots=True)
class Procedure:
    """A CPT or HCPCS procedure code with a description and the phrase a note would use."""

    key: str
    vocabulary: str
    value: str
    name: str
    phrase: str

    @property
    def code(self) -> str:
        return f"{self.vocabulary}{schema.SEP}{self.value}"


@dataclass(frozen=True, slots=True)
class Observation:
    """A coded observation without a LOINC lab behind it (SNOMED findings, LOINC categorical results)."""

    key: str
    vocabulary: str
    value: str
    name: str
    unit: str | None = None

    @property
    def code(self) -> str:
        return f"{self.vocabulary}{schema.SEP}{self.value}"


@dataclass(frozen=True, slots=True)
class CodeRevision:
    """A code that replaced an older one on ``since`` (e.g. CPT 71271 replaced HCPCS G0297 for screening CT).

    Rows dated before ``since`` are written with ``before``; the ICD-9 switch is handled separately.
    """

    code: str
    before: str
    before_description: str
    since: date


def check_known(owner: str, what: str, names: Iterable[str], table: Mapping[str, object]) -> None:
    """``ValueError`` ("<owner>: unknown <what> 'name'") for the first of ``names`` not in ``table``: how the
    built-in tables check, at import, that the keys they refer to exist.

    >>> check_known("condition x", "lab", ["hgb", "nope"], {"hgb": 1})
    Traceback (most recent call last):
    ...
    ValueError: condition x: unknown lab 'nope'
    """
    for name in names:
        if name not in table:
            raise ValueError(f"{owner}: unknown {what} {name!r}")


def _index(items):
    out = {}
    for item in items:
        if item.key in out:
            raise ValueError(f"duplicate catalog key {item.key!r}")
        out[item.key] = item
    return out


D = Diagnosis
DX: dict[str, Diagnosis] = _index([
    # --- chronic background conditions
    D("hypertension", "I10", "401.9", "Unspecified essential hypertension", "hypertension"),
    D("hyperlipidemia", "E78.5", "272.4", "Other and unspecified hyperlipidemia", "hyperlipidemia"),
    D("diabetes", "E11.9", "250.00", "Diabetes mellitus without mention of complication, type II, not stated as uncontrolled", "type 2 diabetes"),
    D("diabetes_hyperglycemia", "E11.65", "250.02", "Diabetes mellitus without mention of complication, type II, uncontrolled", "type 2 diabetes with hyperglycemia"),
    D("prediabetes", "R73.03", "790.29", "Other abnormal glucose", "prediabetes"),
    D("obesity", "E66.9", "278.00", "Obesity, unspecified", "obesity"),
    D("morbid_obesity", "E66.01", "278.01", "Morbid obesity", "morbid obesity"),
    D("hypothyroidism", "E03.9", "244.9", "Unspecified acquired hypothyroidism", "hypothyroidism"),
    D("osteoarthritis", "M19.90", "715.90", "Osteoarthrosis, unspecified whether generalized or localized, site unspecified", "osteoarthritis"),
    D("depression", "F32.9", "311", "Depressive disorder, not elsewhere classified", "depression"),
    D("anxiety", "F41.9", "300.00", "Anxiety state, unspecified", "anxiety"),
    D("asthma", "J45.909", "493.90", "Asthma, unspecified type, unspecified", "asthma"),
    D("cad", "I25.10", "414.01", "Coronary atherosclerosis of native coronary artery", "coronary artery disease"),
    D("afib", "I48.91", "427.31", "Atrial fibrillation", "atrial fibrillation"),
    D("chf", "I50.9", "428.0", "Congestive heart failure, unspecified", "heart failure"),
    D("ckd", "N18.9", "585.9", "Chronic kidney disease, unspecified", "chronic kidney disease"),
    D("allergic_rhinitis", "J30.9", "477.9", "Allergic rhinitis, cause unspecified", "allergic rhinitis"),
    D("insomnia", "G47.00", "780.52", "Insomnia, unspecified", "insomnia"),
    D("vitamin_d_deficiency", "E55.9", "268.9", "Unspecified vitamin D deficiency", "vitamin D deficiency"),
    D("osteoporosis", "M81.0", "733.00", "Osteoporosis, unspecified", "osteoporosis"),
    D("migraine", "G43.909", "346.90", "Migraine, unspecified, without mention of intractable migraine", "migraine"),
    D("gout", "M10.9", "274.9", "Gout, unspecified", "gout"),
    D("copd", "J44.9", "496", "Chronic airway obstruction, not elsewhere classified", "COPD"),
    D("emphysema", "J43.9", "492.8", "Other emphysema", "emphysema"),
    D("gerd", "K21.9", "530.81", "Esophageal reflux", "gastroesophageal reflux disease"),
    D("barrett", "K22.70", "530.85", "Barrett's esophagus", "Barrett's esophagus"),
    D("h_pylori", "B96.81", "041.86", "Helicobacter pylori [H. pylori]", "Helicobacter pylori infection"),
    D("atrophic_gastritis", "K29.40", "535.10", "Atrophic gastritis, without mention of hemorrhage", "chronic atrophic gastritis"),
    D("alcohol_dependence", "F10.20", "303.90", "Other and unspecified alcohol dependence, unspecified drinking behavior", "alcohol use disorder"),
    D("alcohol_abuse", "F10.10", "305.00", "Alcohol abuse, unspecified drinking behavior", "alcohol abuse"),
    D("alcoholic_cirrhosis", "K70.30", "571.2", "Alcoholic cirrhosis of liver", "alcoholic cirrhosis"),
    D("cirrhosis", "K74.60", "571.5", "Cirrhosis of liver without mention of alcohol", "cirrhosis"),
    D("hepatitis_b", "B18.1", "070.32", "Chronic viral hepatitis B without mention of hepatic coma without mention of hepatitis delta", "chronic hepatitis B"),
    D("hepatitis_c", "B18.2", "070.54", "Chronic hepatitis C without mention of hepatic coma", "chronic hepatitis C"),
    D("nafld", "K76.0", "571.8", "Other chronic nonalcoholic liver disease", "fatty liver disease"),
    D("hemochromatosis", "E83.119", "275.03", "Hemochromatosis", "hemochromatosis"),
    D("ulcerative_colitis", "K51.90", "556.9", "Ulcerative colitis, unspecified", "ulcerative colitis"),
    D("crohn", "K50.90", "555.9", "Regional enteritis of unspecified site", "Crohn's disease"),
    D("colon_polyp", "K63.5", "211.3", "Benign neoplasm of colon", "colon polyp"),
    D("history_colon_polyps", "Z86.0100", "V12.72", "Personal history of colonic polyps", "history of colon polyps"),
    D("fh_digestive", "Z80.0", "V16.0", "Family history of malignant neoplasm of gastrointestinal tract", "family history of gastrointestinal cancer"),
    D("fh_lung", "Z80.1", "V16.1", "Family history of malignant neoplasm of trachea, bronchus, and lung", "family history of lung cancer"),
    D("fh_breast", "Z80.3", "V16.3", "Family history of malignant neoplasm of breast", "family history of breast cancer"),
    D("fh_ovary", "Z80.41", "V16.41", "Family history of malignant neoplasm of ovary", "family history of ovarian cancer"),
    D("fh_prostate", "Z80.42", "V16.42", "Family history of malignant neoplasm of prostate", "family history of prostate cancer"),
    D("fh_bladder", "Z80.52", "V16.52", "Family history of malignant neoplasm of bladder", "family history of bladder cancer"),
    D("fh_leukemia", "Z80.6", "V16.6", "Family history of leukemia", "family history of leukemia"),
    D("fh_lymphoid", "Z80.7", "V16.7", "Family history of other lymphatic and hematopoietic neoplasms", "family history of lymphoma or myeloma"),
    D("brca_breast", "Z15.01", "V84.01", "Genetic susceptibility to malignant neoplasm of breast", "BRCA mutation carrier (breast)"),
    D("brca_ovary", "Z15.02", "V84.02", "Genetic susceptibility to malignant neoplasm of ovary", "BRCA mutation carrier (ovary)"),
    D("hpv_positive", "R87.810", "795.05", "Cervical high risk human papillomavirus (HPV) DNA test positive", "high-risk HPV positive"),
    D("pap_ascus", "R87.610", "795.01", "Papanicolaou smear of cervix with atypical squamous cells of undetermined significance (ASC-US)", "ASC-US Pap smear"),
    D("pap_hsil", "R87.613", "795.04", "Papanicolaou smear of cervix with high grade squamous intraepithelial lesion (HGSIL)", "HSIL Pap smear"),
    D("cin2", "N87.1", "622.12", "Moderate dysplasia of cervix (CIN II)", "cervical dysplasia (CIN II)"),
    D("hiv", "B20", "042", "Human immunodeficiency virus [HIV] disease", "HIV disease"),
    D("endometrial_hyperplasia", "N85.00", "621.30", "Endometrial hyperplasia, unspecified", "endometrial hyperplasia"),
    D("pcos", "E28.2", "256.4", "Polycystic ovaries", "polycystic ovary syndrome"),
    D("endometriosis", "N80.9", "617.9", "Endometriosis, site unspecified", "endometriosis"),
    D("bph", "N40.0", "600.00", "Hypertrophy (benign) of prostate without urinary obstruction and other lower urinary tract symptoms", "benign prostatic hyperplasia"),
    D("bph_luts", "N40.1", "600.01", "Hypertrophy (benign) of prostate with urinary obstruction and other lower urinary tract symptoms", "BPH with lower urinary tract symptoms"),
    D("chronic_pancreatitis", "K86.1", "577.1", "Chronic pancreatitis", "chronic pancreatitis"),
    D("mgus", "D47.2", "273.1", "Monoclonal paraproteinemia", "monoclonal gammopathy (MGUS)"),
    D("mds", "D46.9", "238.75", "Myelodysplastic syndrome, unspecified", "myelodysplastic syndrome"),
    D("rheumatoid_arthritis", "M06.9", "714.0", "Rheumatoid arthritis", "rheumatoid arthritis"),
    D("kidney_transplant", "Z94.0", "V42.0", "Kidney replaced by transplant", "kidney transplant recipient"),
    D("asbestos_exposure", "Z77.090", "V15.84", "Contact with and (suspected) exposure to asbestos", "asbestos exposure"),
    D("hormone_therapy", "Z79.890", "V07.4", "Hormone replacement therapy (postmenopausal)", "postmenopausal hormone therapy"),
    D("dense_breast", "R92.2", "793.82", "Inconclusive mammogram (dense breasts)", "dense breast tissue"),
    D("fibrocystic_breast", "N60.19", "610.1", "Diffuse cystic mastopathy", "fibrocystic breast changes"),
    D("nicotine_dependence", "F17.210", "305.1", "Tobacco use disorder", "nicotine dependence, cigarettes"),
    D("history_tobacco", "Z87.891", "V15.82", "Personal history of tobacco use", "former tobacco use"),
    D("tobacco_counseling", "Z71.6", "V65.42", "Counseling on substance use and abuse (tobacco)", "tobacco cessation counseling"),
    # --- acute complaints, symptoms and findings (background reasons for visits and pre-diagnostic signals)
    D("uri", "J06.9", "465.9", "Acute upper respiratory infections of unspecified site", "upper respiratory infection"),
    D("sinusitis", "J01.90", "461.9", "Acute sinusitis, unspecified", "acute sinusitis"),
    D("bronchitis", "J20.9", "466.0", "Acute bronchitis", "acute bronchitis"),
    D("pharyngitis", "J02.9", "462", "Acute pharyngitis", "pharyngitis"),
    D("uti", "N39.0", "599.0", "Urinary tract infection, site not specified", "urinary tract infection"),
    D("back_pain", "M54.9", "724.5", "Backache, unspecified", "back pain"),
    D("low_back_pain", "M54.50", "724.2", "Lumbago", "low back pain"),
    D("abdominal_pain", "R10.9", "789.00", "Abdominal pain, unspecified site", "abdominal pain"),
    D("epigastric_pain", "R10.13", "789.06", "Abdominal pain, epigastric", "epigastric pain"),
    D("ruq_pain", "R10.11", "789.01", "Abdominal pain, right upper quadrant", "right upper quadrant pain"),
    D("pelvic_pain", "R10.20", "789.09", "Abdominal pain, other specified site", "pelvic pain"),
    D("cough", "R05.9", "786.2", "Cough", "cough"),
    D("fatigue", "R53.83", "780.79", "Other malaise and fatigue", "fatigue"),
    D("headache", "R51.9", "784.0", "Headache", "headache"),
    D("knee_pain", "M25.561", "719.46", "Pain in joint, lower leg", "knee pain"),
    D("dizziness", "R42", "780.4", "Dizziness and giddiness", "dizziness"),
    D("cellulitis", "L03.90", "682.9", "Cellulitis and abscess of unspecified sites", "cellulitis"),
    D("constipation", "K59.00", "564.00", "Constipation, unspecified", "constipation"),
    D("diarrhea", "R19.7", "787.91", "Diarrhea", "diarrhea"),
    D("chest_pain", "R07.9", "786.50", "Chest pain, unspecified", "chest pain"),
    D("chest_wall_pain", "R07.89", "786.59", "Other chest pain", "atypical chest pain"),
    D("dyspnea", "R06.02", "786.05", "Shortness of breath", "shortness of breath"),
    D("weight_loss", "R63.4", "783.21", "Loss of weight", "unintentional weight loss"),
    D("anorexia", "R63.0", "783.0", "Anorexia", "poor appetite"),
    D("nausea", "R11.0", "787.02", "Nausea alone", "nausea"),
    D("nausea_vomiting", "R11.2", "787.01", "Nausea with vomiting", "nausea and vomiting"),
    D("anemia", "D64.9", "285.9", "Anemia, unspecified", "anemia"),
    D("iron_deficiency_anemia", "D50.9", "280.9", "Iron deficiency anemia, unspecified", "iron deficiency anemia"),
    D("blood_loss_anemia", "D50.0", "280.0", "Iron deficiency anemia secondary to blood loss (chronic)", "iron deficiency anemia from chronic blood loss"),
    D("hematuria", "R31.9", "599.70", "Hematuria, unspecified", "hematuria"),
    D("gross_hematuria", "R31.0", "599.71", "Gross hematuria", "gross hematuria"),
    D("rectal_bleeding", "K62.5", "569.3", "Hemorrhage of rectum and anus", "rectal bleeding"),
    D("melena", "K92.1", "578.1", "Blood in stool", "melena"),
    D("occult_blood", "R19.5", "792.1", "Nonspecific abnormal findings in stool contents", "positive fecal occult blood test"),
    D("bowel_habit_change", "R19.4", "787.99", "Other symptoms involving digestive system", "change in bowel habits"),
    D("dysphagia", "R13.10", "787.20", "Dysphagia, unspecified", "dysphagia"),
    D("lymphadenopathy", "R59.0", "785.6", "Enlargement of lymph nodes", "localized lymphadenopathy"),
    D("generalized_lymphadenopathy", "R59.1", "785.6", "Enlargement of lymph nodes", "generalized lymphadenopathy"),
    D("fever", "R50.9", "780.60", "Fever, unspecified", "fever"),
    D("night_sweats", "R61", "780.8", "Generalized hyperhidrosis", "night sweats"),
    D("splenomegaly", "R16.1", "789.2", "Splenomegaly", "splenomegaly"),
    D("hepatomegaly", "R16.0", "789.1", "Hepatomegaly", "hepatomegaly"),
    D("jaundice", "R17", "782.4", "Jaundice, unspecified, not of newborn", "jaundice"),
    D("pruritus", "L29.9", "698.9", "Unspecified pruritic disorder", "pruritus"),
    D("ascites", "R18.8", "789.59", "Other ascites", "ascites"),
    D("bloating", "R14.0", "787.3", "Flatulence, eructation, and gas pain", "abdominal bloating"),
    D("early_satiety", "R68.81", "780.94", "Early satiety", "early satiety"),
    D("dyspepsia", "K30", "536.8", "Dyspepsia and other specified disorders of function of stomach", "dyspepsia"),
    D("hemoptysis", "R04.2", "786.30", "Hemoptysis, unspecified", "hemoptysis"),
    D("hoarseness", "R49.0", "784.42", "Dysphonia", "hoarseness"),
    D("pneumonia", "J18.9", "486", "Pneumonia, organism unspecified", "pneumonia"),
    D("pleural_effusion", "J90", "511.9", "Unspecified pleural effusion", "pleural effusion"),
    D("lung_nodule", "R91.1", "793.11", "Solitary pulmonary nodule", "pulmonary nodule"),
    D("abnormal_lung_imaging", "R91.8", "793.19", "Other nonspecific abnormal finding of lung field", "abnormal chest imaging"),
    D("copd_exacerbation", "J44.1", "491.21", "Obstructive chronic bronchitis with (acute) exacerbation", "COPD exacerbation"),
    D("postmenopausal_bleeding", "N95.0", "627.1", "Postmenopausal bleeding", "postmenopausal bleeding"),
    D("abnormal_uterine_bleeding", "N93.9", "626.9", "Unspecified disorders of menstruation and other abnormal bleeding from female genital tract", "abnormal uterine bleeding"),
    D("ovarian_cyst", "N83.209", "620.2", "Other and unspecified ovarian cyst", "ovarian cyst"),
    D("breast_lump", "N63.0", "611.72", "Lump or mass in breast", "breast lump"),
    D("abnormal_mammogram", "R92.8", "793.89", "Other abnormal findings on radiological examination of breast", "abnormal mammogram"),
    D("mastodynia", "N64.4", "611.71", "Mastodynia", "breast pain"),
    D("elevated_psa", "R97.20", "790.93", "Elevated prostate specific antigen [PSA]", "elevated PSA"),
    D("urinary_frequency", "R35.0", "788.41", "Urinary frequency", "urinary frequency"),
    D("nocturia", "R35.1", "788.43", "Nocturia", "nocturia"),
    D("dysuria", "R30.0", "788.1", "Dysuria", "dysuria"),
    D("erectile_dysfunction", "N52.9", "607.84", "Impotence of organic origin", "erectile dysfunction"),
    D("easy_bruising", "R23.3", "782.7", "Spontaneous ecchymoses", "easy bruising"),
    D("thrombocytopenia", "D69.6", "287.5", "Thrombocytopenia, unspecified", "thrombocytopenia"),
    D("leukocytosis", "D72.829", "288.60", "Leukocytosis, unspecified", "leukocytosis"),
    D("lymphocytosis", "D72.820", "288.61", "Lymphocytosis (symptomatic)", "lymphocytosis"),
    D("neutropenia", "D70.9", "288.00", "Neutropenia, unspecified", "neutropenia"),
    D("pancytopenia", "D61.818", "284.19", "Other pancytopenia", "pancytopenia"),
    D("hypercalcemia", "E83.52", "275.42", "Hypercalcemia", "hypercalcemia"),
    D("aki", "N17.9", "584.9", "Acute kidney failure, unspecified", "acute kidney injury"),
    D("proteinuria", "R80.9", "791.0", "Proteinuria", "proteinuria"),
    D("elevated_liver_enzymes", "R74.8", "790.5", "Other nonspecific abnormal serum enzyme levels", "elevated liver enzymes"),
    D("abnormal_afp", "R77.2", "790.99", "Other nonspecific findings on examination of blood", "elevated alpha-fetoprotein"),
    D("acute_pancreatitis", "K85.90", "577.0", "Acute pancreatitis", "acute pancreatitis"),
    D("hyperglycemia", "R73.09", "790.29", "Other abnormal glucose", "elevated blood glucose"),
    D("pulmonary_embolism", "I26.99", "415.19", "Other pulmonary embolism and infarction", "pulmonary embolism"),
    D("dvt", "I82.409", "453.40", "Acute venous embolism and thrombosis of unspecified deep vessels of lower extremity", "deep vein thrombosis"),
    D("sepsis", "A41.9", "038.9", "Unspecified septicemia", "sepsis"),
    D("lumbar_strain", "S39.012A", "847.2", "Lumbar sprain", "lumbar strain"),
    # --- encounters for screening and prevention
    D("wellness", "Z00.00", "V70.0", "Routine general medical examination at a health care facility", "annual wellness examination"),
    D("screen_colon", "Z12.11", "V76.51", "Special screening for malignant neoplasms of colon", "colorectal cancer screening"),
    D("screen_breast", "Z12.31", "V76.12", "Other screening mammogram", "screening mammogram"),
    D("screen_prostate", "Z12.5", "V76.44", "Special screening for malignant neoplasms of prostate", "prostate cancer screening"),
    D("screen_cervix", "Z12.4", "V76.2", "Special screening for malignant neoplasms of cervix", "cervical cancer screening"),
    D("screen_lung", "Z12.2", "V76.0", "Special screening for malignant neoplasms of respiratory organs", "lung cancer screening"),
    D("flu_vaccine", "Z23", "V04.81", "Need for prophylactic vaccination and inoculation against influenza", "influenza vaccination"),
    # --- oncology care
    D("chemo_encounter", "Z51.11", "V58.11", "Encounter for antineoplastic chemotherapy", "chemotherapy"),
    D("radiotherapy_encounter", "Z51.0", "V58.0", "Encounter for radiotherapy", "radiation therapy"),
    D("palliative_care", "Z51.5", "V66.7", "Encounter for palliative care", "palliative care"),
    D("chemo_neutropenia", "D70.1", "288.03", "Drug induced neutropenia", "chemotherapy-induced neutropenia"),
    D("anemia_neoplastic", "D63.0", "285.22", "Anemia in neoplastic disease", "anemia of malignancy"),
    D("cachexia", "R64", "799.4", "Cachexia", "cachexia"),
    D("cancer_pain", "G89.3", "338.3", "Neoplasm related pain (acute) (chronic)", "cancer-related pain"),
    D("mets_liver", "C78.7", "197.7", "Secondary malignant neoplasm of liver", "liver metastases"),
    D("mets_bone", "C79.51", "198.5", "Secondary malignant neoplasm of bone", "bone metastases"),
    D("mets_brain", "C79.31", "198.3", "Secondary malignant neoplasm of brain", "brain metastases"),
    D("mets_lung", "C78.00", "197.0", "Secondary malignant neoplasm of lung", "lung metastases"),
    D("mets_nodes_thoracic", "C77.1", "196.1", "Secondary and unspecified malignant neoplasm of intrathoracic lymph nodes", "mediastinal nodal metastases"),
    D("mets_nodes_abdominal", "C77.2", "196.2", "Secondary and unspecified malignant neoplasm of intra-abdominal lymph nodes", "abdominal nodal metastases"),
    D("mets_nodes_axillary", "C77.3", "196.3", "Secondary and unspecified malignant neoplasm of lymph nodes of axilla and upper limb", "axillary nodal metastases"),
    D("mets_peritoneum", "C78.6", "197.6", "Secondary malignant neoplasm of retroperitoneum and peritoneum", "peritoneal metastases"),
    D("history_chemo", "Z92.21", "V87.41", "Personal history of antineoplastic chemotherapy", "history of chemotherapy"),
    D("history_radiation", "Z92.3", "V15.3", "Personal history of irradiation", "history of radiation therapy"),
    D("aromatase_inhibitor_use", "Z79.811", "V07.52", "Long-term (current) use of aromatase inhibitors", "long-term aromatase inhibitor use"),
    D("serm_use", "Z79.810", "V07.51", "Long-term (current) use of selective estrogen receptor modulators (SERMs)", "long-term tamoxifen use"),
    D("hx_lung_cancer", "Z85.118", "V10.11", "Personal history of malignant neoplasm of bronchus and lung", "history of lung cancer"),
    D("hx_breast_cancer", "Z85.3", "V10.3", "Personal history of malignant neoplasm of breast", "history of breast cancer"),
    D("hx_prostate_cancer", "Z85.46", "V10.46", "Personal history of malignant neoplasm of prostate", "history of prostate cancer"),
    D("hx_colon_cancer", "Z85.038", "V10.05", "Personal history of malignant neoplasm of large intestine", "history of colon cancer"),
    D("hx_rectal_cancer", "Z85.048", "V10.06", "Personal history of malignant neoplasm of rectum, rectosigmoid junction, and anus", "history of rectal cancer"),
    D("hx_bladder_cancer", "Z85.51", "V10.51", "Personal history of malignant neoplasm of bladder", "history of bladder cancer"),
    D("hx_cervical_cancer", "Z85.41", "V10.41", "Personal history of malignant neoplasm of cervix uteri", "history of cervical cancer"),
    D("hx_uterine_cancer", "Z85.42", "V10.42", "Personal history of malignant neoplasm of other parts of uterus", "history of endometrial cancer"),
    D("hx_ovarian_cancer", "Z85.43", "V10.43", "Personal history of malignant neoplasm of ovary", "history of ovarian cancer"),
    D("hx_esophageal_cancer", "Z85.01", "V10.03", "Personal history of malignant neoplasm of esophagus", "history of esophageal cancer"),
    D("hx_gastric_cancer", "Z85.028", "V10.04", "Personal history of malignant neoplasm of stomach", "history of gastric cancer"),
    D("hx_pancreatic_cancer", "Z85.07", "V10.09", "Personal history of malignant neoplasm of other digestive organs (pancreas)", "history of pancreatic cancer"),
    D("hx_liver_cancer", "Z85.05", "V10.07", "Personal history of malignant neoplasm of liver", "history of liver cancer"),
    D("hx_leukemia", "Z85.6", "V10.60", "Personal history of leukemia, unspecified", "history of leukemia"),
    D("hx_lymphoma", "Z85.72", "V10.79", "Personal history of other lymphatic and hematopoietic neoplasms", "history of non-Hodgkin lymphoma"),
])
del D

L = Lab
LABS: dict[str, Lab] = _index([
    # complete blood count
    L("hgb", "718-7", "Hemoglobin [Mass/volume] in Blood", "g/dL", "hemoglobin", 13.3, 14.9, 0.85, 0.45, 3.5, 20.0, 1, 12.0, 17.5),
    L("hct", "4544-3", "Hematocrit [Volume Fraction] of Blood by Automated count", "%", "hematocrit", 40.0, 44.5, 2.5, 1.4, 12.0, 60.0, 1, 36.0, 50.0),
    L("wbc", "6690-2", "Leukocytes [#/volume] in Blood by Automated count", "10*3/uL", "WBC", 6.8, 6.8, 0.2, 0.14, 0.3, 250.0, 1, 4.0, 11.0, True),
    L("plt", "777-3", "Platelets [#/volume] in Blood by Automated count", "10*3/uL", "platelets", 265.0, 240.0, 45.0, 22.0, 5.0, 1200.0, 0, 150.0, 400.0),
    L("mcv", "787-2", "MCV [Entitic volume] by Automated count", "fL", "MCV", 90.0, 90.0, 3.5, 1.2, 55.0, 125.0, 1, 80.0, 100.0),
    L("neut", "751-8", "Neutrophils [#/volume] in Blood by Automated count", "10*3/uL", "absolute neutrophils", 4.1, 4.1, 0.22, 0.18, 0.05, 60.0, 2, 1.5, 7.7, True),
    L("lymph", "731-0", "Lymphocytes [#/volume] in Blood by Automated count", "10*3/uL", "absolute lymphocytes", 1.9, 1.9, 0.22, 0.14, 0.1, 250.0, 2, 1.0, 4.8, True),
    # comprehensive metabolic panel
    L("glucose", "2345-7", "Glucose [Mass/volume] in Serum or Plasma", "mg/dL", "glucose", 94.0, 97.0, 7.0, 9.0, 40.0, 600.0, 0, 70.0, 99.0),
    L("bun", "3094-0", "Urea nitrogen [Mass/volume] in Serum or Plasma", "mg/dL", "BUN", 14.0, 16.0, 3.0, 2.5, 3.0, 150.0, 0, 7.0, 20.0),
    L("creatinine", "2160-0", "Creatinine [Mass/volume] in Serum or Plasma", "mg/dL", "creatinine", 0.78, 1.0, 0.11, 0.07, 0.3, 12.0, 2, 0.6, 1.3),
    L("sodium", "2951-2", "Sodium [Moles/volume] in Serum or Plasma", "mmol/L", "sodium", 139.5, 139.5, 1.5, 1.6, 115.0, 160.0, 0, 135.0, 145.0),
    L("potassium", "2823-3", "Potassium [Moles/volume] in Serum or Plasma", "mmol/L", "potassium", 4.2, 4.2, 0.22, 0.22, 2.5, 7.0, 1, 3.5, 5.1),
    L("chloride", "2075-0", "Chloride [Moles/volume] in Serum or Plasma", "mmol/L", "chloride", 103.0, 103.0, 1.8, 1.6, 85.0, 120.0, 0, 98.0, 107.0),
    L("co2", "2028-9", "Carbon dioxide, total [Moles/volume] in Serum or Plasma", "mmol/L", "bicarbonate", 26.0, 26.5, 1.4, 1.5, 12.0, 40.0, 0, 22.0, 30.0),
    L("calcium", "17861-6", "Calcium [Mass/volume] in Serum or Plasma", "mg/dL", "calcium", 9.4, 9.4, 0.28, 0.22, 6.0, 15.0, 1, 8.6, 10.3),
    L("protein", "2885-2", "Protein [Mass/volume] in Serum or Plasma", "g/dL", "total protein", 7.0, 7.0, 0.33, 0.22, 4.0, 13.0, 1, 6.0, 8.3),
    L("albumin", "1751-7", "Albumin [Mass/volume] in Serum or Plasma", "g/dL", "albumin", 4.2, 4.3, 0.23, 0.16, 1.5, 5.5, 1, 3.5, 5.0),
    L("bilirubin", "1975-2", "Bilirubin.total [Mass/volume] in Serum or Plasma", "mg/dL", "total bilirubin", 0.55, 0.7, 0.3, 0.18, 0.1, 30.0, 1, 0.1, 1.2, True),
    L("alp", "6768-6", "Alkaline phosphatase [Enzymatic activity/volume] in Serum or Plasma", "U/L", "alkaline phosphatase", 72.0, 75.0, 0.22, 0.1, 20.0, 2000.0, 0, 40.0, 129.0, True),
    L("alt", "1742-6", "Alanine aminotransferase [Enzymatic activity/volume] in Serum or Plasma", "U/L", "ALT", 18.0, 25.0, 0.3, 0.2, 4.0, 3000.0, 0, 7.0, 56.0, True),
    L("ast", "1920-8", "Aspartate aminotransferase [Enzymatic activity/volume] in Serum or Plasma", "U/L", "AST", 20.0, 23.0, 0.25, 0.18, 5.0, 3000.0, 0, 10.0, 40.0, True),
    # lipids and metabolic
    L("cholesterol", "2093-3", "Cholesterol [Mass/volume] in Serum or Plasma", "mg/dL", "total cholesterol", 195.0, 185.0, 30.0, 12.0, 80.0, 400.0, 0, None, 200.0),
    L("triglycerides", "2571-8", "Triglyceride [Mass/volume] in Serum or Plasma", "mg/dL", "triglycerides", 115.0, 135.0, 0.35, 0.2, 30.0, 2000.0, 0, None, 150.0, True),
    L("hdl", "2085-9", "Cholesterol in HDL [Mass/volume] in Serum or Plasma", "mg/dL", "HDL", 58.0, 46.0, 10.0, 4.0, 15.0, 120.0, 0, 40.0, None),
    L("ldl", "13457-7", "Cholesterol in LDL [Mass/volume] in Serum or Plasma by calculation", "mg/dL", "LDL", 112.0, 112.0, 27.0, 10.0, 20.0, 300.0, 0, None, 130.0),
    L("a1c", "4548-4", "Hemoglobin A1c/Hemoglobin.total in Blood", "%", "hemoglobin A1c", 5.5, 5.5, 0.3, 0.15, 4.0, 16.0, 1, None, 5.6),
    L("tsh", "3016-3", "Thyrotropin [Units/volume] in Serum or Plasma", "m[IU]/L", "TSH", 1.8, 1.7, 0.4, 0.25, 0.01, 100.0, 2, 0.4, 4.5, True),
    L("ferritin", "2276-4", "Ferritin [Mass/volume] in Serum or Plasma", "ng/mL", "ferritin", 70.0, 150.0, 0.6, 0.25, 2.0, 5000.0, 0, 15.0, 300.0, True),
    L("inr", "6301-6", "INR in Platelet poor plasma by Coagulation assay", "{INR}", "INR", 1.0, 1.0, 0.05, 0.05, 0.8, 8.0, 1, 0.9, 1.2),
    L("crp", "1988-5", "C reactive protein [Mass/volume] in Serum or Plasma", "mg/L", "CRP", 2.2, 2.0, 0.8, 0.5, 0.1, 400.0, 1, None, 10.0, True),
    L("ldh", "2532-0", "Lactate dehydrogenase [Enzymatic activity/volume] in Serum or Plasma", "U/L", "LDH", 180.0, 185.0, 0.15, 0.1, 60.0, 5000.0, 0, 120.0, 246.0, True),
    # tumour markers
    L("psa", "2857-1", "Prostate specific Ag [Mass/volume] in Serum or Plasma", "ng/mL", "PSA", 1.1, 1.1, 0.7, 0.15, 0.05, 5000.0, 2, None, 4.0, True),
    L("ca125", "10334-1", "Cancer Ag 125 [Units/volume] in Serum or Plasma", "U/mL", "CA-125", 12.0, 12.0, 0.45, 0.15, 2.0, 20000.0, 0, None, 35.0, True),
    L("cea", "2039-6", "Carcinoembryonic Ag [Mass/volume] in Serum or Plasma", "ng/mL", "CEA", 1.6, 1.8, 0.45, 0.15, 0.2, 5000.0, 1, None, 3.0, True),
    L("afp", "1834-1", "Alpha-1-Fetoprotein [Mass/volume] in Serum or Plasma", "ng/mL", "AFP", 3.2, 3.5, 0.4, 0.15, 0.5, 100000.0, 1, None, 8.0, True),
    L("ca199", "24108-3", "Cancer Ag 19-9 [Units/volume] in Serum or Plasma", "U/mL", "CA 19-9", 12.0, 12.0, 0.55, 0.15, 1.0, 50000.0, 0, None, 37.0, True),
    # vitals
    L("weight", "29463-7", "Body weight", "kg", "weight", 75.0, 88.0, 0.0, 0.9, 30.0, 250.0, 1),
    L("bmi", "39156-5", "Body mass index (BMI) [Ratio]", "kg/m2", "BMI", 28.0, 28.5, 0.0, 0.3, 12.0, 75.0, 1, 18.5, 25.0),
    L("height", "8302-2", "Body height", "cm", "height", 162.5, 176.0, 6.5, 0.6, 130.0, 210.0, 1),
    L("sbp", "8480-6", "Systolic blood pressure", "mm[Hg]", "systolic blood pressure", 124.0, 128.0, 11.0, 9.0, 70.0, 230.0, 0, None, 130.0),
    L("dbp", "8462-4", "Diastolic blood pressure", "mm[Hg]", "diastolic blood pressure", 76.0, 79.0, 7.0, 6.0, 40.0, 130.0, 0, None, 80.0),
    L("hr", "8867-4", "Heart rate", "/min", "heart rate", 75.0, 72.0, 7.0, 6.0, 35.0, 170.0, 0, 60.0, 100.0),
    L("spo2", "59408-5", "Oxygen saturation in Arterial blood by Pulse oximetry", "%", "oxygen saturation", 97.5, 97.0, 0.8, 0.9, 70.0, 100.0, 0, 94.0, None),
    L("temp", "8310-5", "Body temperature", "Cel", "temperature", 36.7, 36.7, 0.15, 0.25, 34.0, 41.5, 1, None, 38.0),
    L("ecog", "89247-1", "ECOG Performance Status score", "{score}", "ECOG performance status", 0.0, 0.0, 0.0, 0.0, 0.0, 5.0, 0),
])
del L

PANELS: dict[str, tuple[str, ...]] = {
    "cbc": ("hgb", "hct", "wbc", "plt", "mcv", "neut", "lymph"),
    "cmp": ("glucose", "bun", "creatinine", "sodium", "potassium", "chloride", "co2", "calcium", "protein", "albumin", "bilirubin", "alp", "alt", "ast"),
    "bmp": ("glucose", "bun", "creatinine", "sodium", "potassium", "chloride", "co2", "calcium"),
    "lipids": ("cholesterol", "triglycerides", "hdl", "ldl"),
    "hepatic": ("protein", "albumin", "bilirubin", "alp", "alt", "ast"),
    "a1c": ("a1c",), "tsh": ("tsh",), "ferritin": ("ferritin",), "inr": ("inr",), "crp": ("crp",), "ldh": ("ldh",),
    "psa": ("psa",), "ca125": ("ca125",), "cea": ("cea",), "afp": ("afp",), "ca199": ("ca199",),
}
"""Lab orders: a panel is drawn as all of its labs at once."""

M = Medication
MEDS: dict[str, Medication] = _index([
    M("metformin", "6809", "metformin"), M("insulin_glargine", "274783", "insulin glargine"), M("glipizide", "4821", "glipizide"),
    M("lisinopril", "29046", "lisinopril"), M("losartan", "52175", "losartan"), M("amlodipine", "17767", "amlodipine"),
    M("hctz", "5487", "hydrochlorothiazide"), M("metoprolol", "6918", "metoprolol"), M("atorvastatin", "83367", "atorvastatin"),
    M("simvastatin", "36567", "simvastatin"), M("rosuvastatin", "301542", "rosuvastatin"), M("omeprazole", "7646", "omeprazole"),
    M("pantoprazole", "40790", "pantoprazole"), M("famotidine", "4278", "famotidine"), M("albuterol", "435", "albuterol"),
    M("tiotropium", "69120", "tiotropium"), M("fluticasone", "41126", "fluticasone"), M("budesonide", "19831", "budesonide"),
    M("montelukast", "88249", "montelukast"), M("levothyroxine", "10582", "levothyroxine"), M("sertraline", "36437", "sertraline"),
    M("escitalopram", "321988", "escitalopram"), M("trazodone", "10737", "trazodone"), M("gabapentin", "25480", "gabapentin"),
    M("allopurinol", "519", "allopurinol"), M("warfarin", "11289", "warfarin"), M("apixaban", "1364430", "apixaban"),
    M("furosemide", "4603", "furosemide"), M("spironolactone", "9997", "spironolactone"), M("lactulose", "6218", "lactulose"),
    M("rifaximin", "35619", "rifaximin"), M("entecavir", "306266", "entecavir"), M("tamsulosin", "77492", "tamsulosin"),
    M("finasteride", "25025", "finasteride"), M("alendronate", "46041", "alendronate"), M("cholecalciferol", "2418", "cholecalciferol"),
    M("estradiol", "4083", "estradiol"), M("medroxyprogesterone", "6691", "medroxyprogesterone"), M("mesalamine", "52582", "mesalamine"),
    M("varenicline", "591622", "varenicline"), M("nicotine", "7407", "nicotine"), M("naltrexone", "7243", "naltrexone"),
    M("methotrexate", "6851", "methotrexate"), M("tacrolimus", "42316", "tacrolimus"), M("sumatriptan", "37418", "sumatriptan"),
    M("amoxicillin", "723", "amoxicillin"), M("azithromycin", "18631", "azithromycin"), M("ciprofloxacin", "2551", "ciprofloxacin"),
    M("nitrofurantoin", "7454", "nitrofurantoin"), M("cephalexin", "2231", "cephalexin"), M("doxycycline", "3640", "doxycycline"),
    M("levofloxacin", "82122", "levofloxacin"), M("prednisone", "8640", "prednisone"), M("ibuprofen", "5640", "ibuprofen"),
    M("naproxen", "7258", "naproxen"), M("cyclobenzaprine", "21949", "cyclobenzaprine"), M("ondansetron", "26225", "ondansetron"),
    M("oxycodone", "7804", "oxycodone"), M("hydrocodone", "5489", "hydrocodone"), M("tramadol", "10689", "tramadol"),
    M("morphine", "7052", "morphine"), M("acetaminophen", "161", "acetaminophen"), M("guaifenesin", "5032", "guaifenesin"),
    M("docusate", "82003", "docusate"), M("dexamethasone", "3264", "dexamethasone"), M("filgrastim", "68442", "filgrastim"),
    M("pegfilgrastim", "338036", "pegfilgrastim"), M("prochlorperazine", "8704", "prochlorperazine"), M("lorazepam", "6470", "lorazepam"),
    M("enoxaparin", "67108", "enoxaparin"),
    # antineoplastic agents
    M("carboplatin", "40048", "carboplatin"), M("cisplatin", "2555", "cisplatin"), M("paclitaxel", "56946", "paclitaxel"),
    M("docetaxel", "72962", "docetaxel"), M("pemetrexed", "68446", "pemetrexed"), M("gemcitabine", "12574", "gemcitabine"),
    M("etoposide", "4179", "etoposide"), M("vinorelbine", "39541", "vinorelbine"), M("pembrolizumab", "1547545", "pembrolizumab"),
    M("nivolumab", "1597876", "nivolumab"), M("atezolizumab", "1792776", "atezolizumab"), M("durvalumab", "1919503", "durvalumab"),
    M("osimertinib", "1721560", "osimertinib"), M("alectinib", "1727455", "alectinib"), M("fluorouracil", "4492", "fluorouracil"),
    M("leucovorin", "6313", "leucovorin"), M("oxaliplatin", "32592", "oxaliplatin"), M("irinotecan", "51499", "irinotecan"),
    M("capecitabine", "194000", "capecitabine"), M("bevacizumab", "253337", "bevacizumab"), M("trastuzumab", "224905", "trastuzumab"),
    M("pertuzumab", "1298944", "pertuzumab"), M("tamoxifen", "10324", "tamoxifen"), M("anastrozole", "84857", "anastrozole"),
    M("letrozole", "72965", "letrozole"), M("palbociclib", "1601374", "palbociclib"), M("fulvestrant", "282357", "fulvestrant"),
    M("cyclophosphamide", "3002", "cyclophosphamide"), M("doxorubicin", "3639", "doxorubicin"), M("leuprolide", "42375", "leuprolide"),
    M("bicalutamide", "83008", "bicalutamide"), M("enzalutamide", "1307298", "enzalutamide"), M("abiraterone", "1100072", "abiraterone"),
    M("sorafenib", "495881", "sorafenib"), M("lenvatinib", "1603296", "lenvatinib"), M("rituximab", "121191", "rituximab"),
    M("bendamustine", "134547", "bendamustine"), M("ibrutinib", "1442981", "ibrutinib"), M("venetoclax", "1747556", "venetoclax"),
    M("azacitidine", "1251", "azacitidine"), M("cytarabine", "3041", "cytarabine"), M("daunorubicin", "3108", "daunorubicin"),
    M("imatinib", "282388", "imatinib"), M("lenalidomide", "342369", "lenalidomide"), M("bortezomib", "358258", "bortezomib"),
    M("vincristine", "11202", "vincristine"), M("bleomycin", "1622", "bleomycin"), M("vinblastine", "11198", "vinblastine"),
    M("olaparib", "1597582", "olaparib"), M("dacarbazine", "3098", "dacarbazine"),
])
del M

P = Procedure
PROCEDURES: dict[str, Procedure] = _index([
    # evaluation and management
    P("office_new", "CPT", "99204", "Office or other outpatient visit, new patient, moderate complexity", "new patient visit"),
    P("office_low", "CPT", "99213", "Office or other outpatient visit, established patient, low complexity", "office visit"),
    P("office_mod", "CPT", "99214", "Office or other outpatient visit, established patient, moderate complexity", "office visit"),
    P("office_high", "CPT", "99215", "Office or other outpatient visit, established patient, high complexity", "office visit"),
    P("preventive_40", "CPT", "99396", "Periodic preventive medicine visit, established patient, age 40-64", "preventive visit"),
    P("preventive_65", "CPT", "99397", "Periodic preventive medicine visit, established patient, age 65 and older", "preventive visit"),
    P("preventive_18", "CPT", "99395", "Periodic preventive medicine visit, established patient, age 18-39", "preventive visit"),
    P("ed_mod", "CPT", "99283", "Emergency department visit, moderate severity", "emergency visit"),
    P("ed_high", "CPT", "99284", "Emergency department visit, high severity", "emergency visit"),
    P("ed_critical", "CPT", "99285", "Emergency department visit, high severity with threat to life", "emergency visit"),
    P("hospital_initial", "CPT", "99223", "Initial hospital inpatient care, high complexity", "hospital admission"),
    P("hospital_discharge", "CPT", "99238", "Hospital discharge day management, 30 minutes or less", "hospital discharge"),
    P("advance_care_planning", "CPT", "99497", "Advance care planning, first 30 minutes", "advance care planning"),
    # imaging
    P("chest_xray", "CPT", "71046", "Radiologic examination, chest; 2 views", "chest X-ray"),
    P("ct_chest", "CPT", "71250", "Computed tomography, thorax, without contrast material", "CT chest without contrast"),
    P("ct_chest_contrast", "CPT", "71260", "Computed tomography, thorax, with contrast material", "CT chest with contrast"),
    P("ldct", "CPT", "71271", "Computed tomography, thorax, low dose for lung cancer screening, without contrast", "low-dose CT lung cancer screening"),
    P("ct_abd_pelvis", "CPT", "74177", "Computed tomography, abdomen and pelvis, with contrast material", "CT abdomen and pelvis"),
    P("ct_urogram", "CPT", "74178", "Computed tomography, abdomen and pelvis, without then with contrast (urography)", "CT urogram"),
    P("ct_abdomen", "CPT", "74170", "Computed tomography, abdomen, without then with contrast material", "multiphase CT abdomen"),
    P("mri_abdomen", "CPT", "74183", "Magnetic resonance imaging, abdomen, without then with contrast material", "MRI abdomen"),
    P("us_abdomen", "CPT", "76700", "Ultrasound, abdominal, real time with image documentation; complete", "abdominal ultrasound"),
    P("us_transvaginal", "CPT", "76830", "Ultrasound, transvaginal", "transvaginal ultrasound"),
    P("us_pelvis", "CPT", "76856", "Ultrasound, pelvic (nonobstetric), complete", "pelvic ultrasound"),
    P("mammo_screen", "CPT", "77067", "Screening mammography, bilateral, including computer-aided detection", "screening mammogram"),
    P("mammo_diag", "CPT", "77066", "Diagnostic mammography, bilateral, including computer-aided detection", "diagnostic mammogram"),
    P("us_breast", "CPT", "76641", "Ultrasound, breast, unilateral, complete", "breast ultrasound"),
    P("mri_breast", "CPT", "77049", "Magnetic resonance imaging, breast, without and with contrast, bilateral", "breast MRI"),
    P("pet_ct", "CPT", "78815", "PET with concurrently acquired CT; skull base to mid-thigh", "PET/CT"),
    P("mri_brain", "CPT", "70553", "Magnetic resonance imaging, brain, without then with contrast material", "MRI brain"),
    P("mri_pelvis", "CPT", "72197", "Magnetic resonance imaging, pelvis, without then with contrast material", "MRI pelvis"),
    P("bone_scan", "CPT", "78306", "Bone and/or joint imaging; whole body", "bone scan"),
    P("skeletal_survey", "CPT", "77075", "Radiologic examination, osseous survey; complete (axial and appendicular skeleton)", "skeletal survey"),
    P("dxa", "CPT", "77080", "Dual-energy X-ray absorptiometry, bone density study, axial skeleton", "bone density scan"),
    P("ecg", "CPT", "93000", "Electrocardiogram, routine, with interpretation and report", "ECG"),
    P("echo", "CPT", "93306", "Echocardiography, transthoracic, complete, with Doppler", "echocardiogram"),
    P("spirometry", "CPT", "94010", "Spirometry, including graphic record", "spirometry"),
    # endoscopy and biopsies
    P("colonoscopy", "CPT", "45378", "Colonoscopy, flexible; diagnostic", "colonoscopy"),
    P("colonoscopy_biopsy", "CPT", "45380", "Colonoscopy, flexible; with biopsy, single or multiple", "colonoscopy with biopsy"),
    P("colonoscopy_polypectomy", "CPT", "45385", "Colonoscopy, flexible; with removal of lesion(s) by snare technique", "colonoscopy with polypectomy"),
    P("screening_colonoscopy", "HCPCS", "G0121", "Colorectal cancer screening; colonoscopy on individual not meeting criteria for high risk", "screening colonoscopy"),
    P("fit", "CPT", "82274", "Blood, occult, by fecal hemoglobin determination by immunoassay", "fecal immunochemical test"),
    P("egd", "CPT", "43235", "Esophagogastroduodenoscopy, flexible, transoral; diagnostic", "upper endoscopy"),
    P("egd_biopsy", "CPT", "43239", "Esophagogastroduodenoscopy, flexible, transoral; with biopsy, single or multiple", "upper endoscopy with biopsy"),
    P("eus", "CPT", "43259", "Esophagogastroduodenoscopy with endoscopic ultrasound examination", "endoscopic ultrasound"),
    P("eus_fna", "CPT", "43242", "Esophagogastroduodenoscopy with transendoscopic ultrasound-guided fine needle aspiration/biopsy", "EUS-guided fine needle aspiration"),
    P("ercp", "CPT", "43260", "Endoscopic retrograde cholangiopancreatography (ERCP); diagnostic", "ERCP"),
    P("lung_biopsy", "CPT", "32408", "Core needle biopsy, lung or mediastinum, percutaneous, including imaging guidance", "CT-guided lung biopsy"),
    P("bronch_biopsy", "CPT", "31628", "Bronchoscopy with transbronchial lung biopsy(s), single lobe", "bronchoscopy with biopsy"),
    P("ebus", "CPT", "31652", "Bronchoscopy with endobronchial ultrasound guided transtracheal/transbronchial sampling, 1 or 2 nodal stations", "EBUS-guided nodal sampling"),
    P("breast_biopsy", "CPT", "19083", "Biopsy, breast, with placement of localization device and imaging of specimen, percutaneous; ultrasound guidance", "ultrasound-guided breast biopsy"),
    P("prostate_biopsy", "CPT", "55700", "Biopsy, prostate; needle or punch, single or multiple, any approach", "prostate biopsy"),
    P("cystoscopy", "CPT", "52000", "Cystourethroscopy (separate procedure)", "cystoscopy"),
    P("cystoscopy_biopsy", "CPT", "52204", "Cystourethroscopy, with biopsy(s)", "cystoscopy with biopsy"),
    P("colposcopy_biopsy", "CPT", "57454", "Colposcopy of the cervix with biopsy(s) and endocervical curettage", "colposcopy with biopsy"),
    P("endometrial_biopsy", "CPT", "58100", "Endometrial sampling (biopsy) with or without endocervical sampling", "endometrial biopsy"),
    P("liver_biopsy", "CPT", "47000", "Biopsy of liver, needle; percutaneous", "liver biopsy"),
    P("bone_marrow_biopsy", "CPT", "38221", "Diagnostic bone marrow; biopsy(ies)", "bone marrow biopsy"),
    P("lymph_node_biopsy", "CPT", "38500", "Biopsy or excision of lymph node(s); open, superficial", "excisional lymph node biopsy"),
    P("paracentesis", "CPT", "49083", "Abdominal paracentesis (diagnostic or therapeutic); with imaging guidance", "paracentesis"),
    P("thoracentesis", "CPT", "32555", "Thoracentesis, needle or catheter, aspiration of the pleural space; with imaging guidance", "thoracentesis"),
    # laboratory and pathology orders
    P("surgical_path", "CPT", "88305", "Level IV - Surgical pathology, gross and microscopic examination", "surgical pathology"),
    P("surgical_path_resection", "CPT", "88309", "Level VI - Surgical pathology, gross and microscopic examination (resection)", "surgical pathology of resection"),
    P("ihc", "CPT", "88342", "Immunohistochemistry or immunocytochemistry, per specimen; initial single antibody stain", "immunohistochemistry"),
    P("flow_cytometry", "CPT", "88184", "Flow cytometry, cell surface, cytoplasmic, or nuclear marker; first marker", "flow cytometry"),
    P("molecular_panel", "CPT", "81445", "Targeted genomic sequence analysis panel, solid organ neoplasm, 5-50 genes", "tumor molecular panel"),
    P("pap", "CPT", "88142", "Cytopathology, cervical or vaginal, thin layer preparation", "Pap smear"),
    P("hpv_test", "CPT", "87624", "Infectious agent detection by nucleic acid, Human Papillomavirus, high-risk types", "HPV test"),
    P("psa_screen", "HCPCS", "G0103", "Prostate cancer screening; prostate specific antigen test (PSA)", "screening PSA"),
    P("spep", "CPT", "84165", "Protein; electrophoretic fractionation and quantitation, serum", "serum protein electrophoresis"),
    P("urinalysis", "CPT", "81001", "Urinalysis, automated, with microscopy", "urinalysis"),
    P("urine_cytology", "CPT", "88112", "Cytopathology, selective cellular enhancement technique with interpretation", "urine cytology"),
    # treatment
    P("chemo_infusion", "CPT", "96413", "Chemotherapy administration, intravenous infusion technique; up to 1 hour, single or initial substance/drug", "chemotherapy infusion"),
    P("chemo_infusion_seq", "CPT", "96417", "Chemotherapy administration, intravenous infusion technique; each additional sequential infusion", "sequential chemotherapy infusion"),
    P("chemo_injection_hormonal", "CPT", "96402", "Chemotherapy administration, subcutaneous or intramuscular; hormonal anti-neoplastic", "hormonal injection"),
    P("port_placement", "CPT", "36561", "Insertion of tunneled centrally inserted central venous access device, with subcutaneous port", "port placement"),
    P("rt_planning", "CPT", "77263", "Therapeutic radiology treatment planning; complex", "radiation treatment planning"),
    P("rt_simulation", "CPT", "77290", "Therapeutic radiology simulation-aided field setting; complex", "radiation simulation"),
    P("rt_delivery", "CPT", "77385", "Intensity modulated radiation treatment delivery (IMRT), simple", "IMRT delivery"),
    P("rt_management", "CPT", "77427", "Radiation treatment management, 5 treatments", "weekly radiation management"),
    P("sbrt", "CPT", "77373", "Stereotactic body radiation therapy, treatment delivery, per fraction to 1 or more lesions", "stereotactic body radiation therapy"),
    P("lobectomy", "CPT", "32663", "Thoracoscopy, surgical; with lobectomy (single lobe)", "thoracoscopic lobectomy"),
    P("lumpectomy", "CPT", "19301", "Mastectomy, partial (lumpectomy)", "lumpectomy"),
    P("mastectomy", "CPT", "19303", "Mastectomy, simple, complete", "mastectomy"),
    P("prostatectomy", "CPT", "55866", "Laparoscopic radical prostatectomy, including robotic assistance", "robotic radical prostatectomy"),
    P("turbt", "CPT", "52235", "Cystourethroscopy with fulguration and/or resection of medium bladder tumor(s)", "transurethral resection of bladder tumor"),
    P("cystectomy", "CPT", "51595", "Cystectomy, complete, with ureteroileal conduit and bilateral pelvic lymphadenectomy", "radical cystectomy"),
    P("bladder_instillation", "CPT", "51720", "Bladder instillation of anticarcinogenic agent", "intravesical instillation"),
    P("bcg", "HCPCS", "J9030", "BCG live intravesical instillation, 1 mg", "intravesical BCG"),
    P("leuprolide_inj", "HCPCS", "J9217", "Leuprolide acetate (for depot suspension), 7.5 mg", "leuprolide depot injection"),
    P("hysterectomy", "CPT", "58571", "Laparoscopy, surgical, with total hysterectomy, with removal of tubes and/or ovaries", "total laparoscopic hysterectomy with salpingo-oophorectomy"),
    P("radical_hysterectomy", "CPT", "58210", "Radical abdominal hysterectomy, with bilateral total pelvic lymphadenectomy", "radical hysterectomy"),
    P("debulking", "CPT", "58953", "Bilateral salpingo-oophorectomy with omentectomy, total abdominal hysterectomy and radical dissection for debulking", "cytoreductive surgery"),
    P("esophagectomy", "CPT", "43117", "Partial esophagectomy, distal two-thirds, with thoracotomy and separate abdominal incision (Ivor Lewis)", "esophagectomy"),
    P("gastrectomy", "CPT", "43620", "Gastrectomy, total; with esophagoenterostomy", "total gastrectomy"),
    P("whipple", "CPT", "48150", "Pancreatectomy, proximal subtotal with total duodenectomy, partial gastrectomy, choledochoenterostomy and gastrojejunostomy (Whipple-type procedure)", "pancreaticoduodenectomy (Whipple)"),
    P("hepatectomy", "CPT", "47120", "Hepatectomy, resection of liver; partial lobectomy", "partial hepatectomy"),
    P("liver_ablation", "CPT", "47382", "Ablation, 1 or more liver tumor(s), percutaneous, radiofrequency", "radiofrequency ablation of liver tumor"),
    P("tace", "CPT", "37243", "Vascular embolization or occlusion, for tumors, organ ischemia, or infarction", "transarterial chemoembolization"),
    P("colectomy", "CPT", "44204", "Laparoscopy, surgical; colectomy, partial, with anastomosis", "laparoscopic partial colectomy"),
    P("low_anterior_resection", "CPT", "44207", "Laparoscopy, surgical; colectomy, partial, with anastomosis, with coloproctostomy (low pelvic anastomosis)", "low anterior resection"),
    P("stem_cell_transplant", "CPT", "38241", "Hematopoietic progenitor cell (HPC); autologous transplantation", "autologous stem cell transplant"),
    P("hospice_home", "HCPCS", "Q5001", "Hospice or home health care provided in patient's home/residence", "home hospice"),
    P("flu_shot", "CPT", "90686", "Influenza virus vaccine, quadrivalent, split virus, preservative free, intramuscular", "influenza vaccine"),
])
del P

OBSERVATIONS: dict[str, Observation] = _index([
    Observation("never_smoker", schema.SNOMED, "266919005", "Never smoked tobacco"),
    Observation("former_smoker", schema.SNOMED, "8517006", "Ex-smoker"),
    Observation("current_daily_smoker", schema.SNOMED, "449868002", "Smokes tobacco daily"),
    Observation("current_some_day_smoker", schema.SNOMED, "428041000124106", "Occasional tobacco smoker"),
    Observation("smoking_unknown", schema.SNOMED, "266927001", "Tobacco smoking consumption unknown"),
    Observation("pack_years", schema.SNOMED, "401201003", "Cigarette pack-years", "{pack-years}"),
    Observation("stage_group", schema.LOINC, "21908-9", "Stage group.clinical Cancer"),
    Observation("stage_t", schema.LOINC, "21905-5", "Primary tumor.clinical [Class] Cancer"),
    Observation("stage_n", schema.LOINC, "21906-3", "Regional lymph nodes.clinical [Class] Cancer"),
    Observation("stage_m", schema.LOINC, "21907-1", "Distant metastases.clinical [Class] Cancer"),
])

REVISIONS: tuple[CodeRevision, ...] = (
    CodeRevision(PROCEDURES["ldct"].code, "HCPCS//G0297", "Low dose CT scan (LDCT) for lung cancer screening", date(2021, 1, 1)),
    CodeRevision(PROCEDURES["chest_xray"].code, "CPT//71020", "Radiologic examination, chest, 2 views, frontal and lateral", date(2018, 1, 1)),
    CodeRevision(PROCEDURES["lung_biopsy"].code, "CPT//32405", "Biopsy, lung or mediastinum, percutaneous needle", date(2019, 1, 1)),
    CodeRevision(PROCEDURES["mammo_screen"].code, "CPT//77057", "Screening mammography, bilateral (2-view study of each breast)", date(2017, 1, 1)),
    CodeRevision(PROCEDURES["mammo_diag"].code, "CPT//77056", "Mammography; bilateral", date(2017, 1, 1)),
    CodeRevision(PROCEDURES["mri_breast"].code, "CPT//77059", "Magnetic resonance imaging, breast, without and/or with contrast material; bilateral", date(2019, 1, 1)),
    CodeRevision(DX["cough"].code, "ICD10CM//R05", "", date(2020, 10, 1)),
    CodeRevision(DX["headache"].code, "ICD10CM//R51", "", date(2020, 10, 1)),
    CodeRevision(DX["low_back_pain"].code, "ICD10CM//M54.5", "", date(2021, 10, 1)),
    CodeRevision(DX["pelvic_pain"].code, "ICD10CM//R10.2", "", date(2024, 10, 1)),
    CodeRevision(DX["history_colon_polyps"].code, "ICD10CM//Z86.010", "", date(2023, 10, 1)),
    CodeRevision(DX["breast_lump"].code, "ICD10CM//N63", "", date(2017, 10, 1)),
    CodeRevision(DX["ovarian_cyst"].code, "ICD10CM//N83.20", "", date(2016, 10, 1)),
    CodeRevision(DX["hemochromatosis"].code, "ICD10CM//E83.11", "", date(2016, 10, 1)),
)
"""Codes that changed during the data window (ICD-10 descriptions of the older codes come from simple-icd-10-cm)."""

ENCOUNTER_TYPES = ("AMB", "ED", "IMP")
ENCOUNTER_DESCRIPTIONS = {
    "AMB": "Ambulatory (outpatient) encounter",
    "ED": "Emergency department encounter",
    "IMP": "Inpatient admission",
}
NOTE_TYPES = ("PROGRESS", "RADIOLOGY", "PATHOLOGY")
NOTE_DESCRIPTIONS = {
    "PROGRESS": "Clinical progress note (free text in text_value)",
    "RADIOLOGY": "Radiology report (free text in text_value)",
    "PATHOLOGY": "Pathology report (free text in text_value)",
}
RACES = (
    "White", "Black or African American", "Asian", "American Indian or Alaska Native",
    "Native Hawaiian or Other Pacific Islander", "Other", "Unknown",
)
RACE_WEIGHTS = (0.775, 0.11, 0.035, 0.006, 0.004, 0.03, 0.04)
"""Roughly the race mix of the controls in TrajOnco's Table 1."""
ETHNICITIES = ("Hispanic or Latino", "Not Hispanic or Latino")
HISPANIC_SHARE = 0.075
