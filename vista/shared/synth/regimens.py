"""Treatment plans per cancer: first-line plans by stage bucket (I-IV) and later palliative lines.

A plan is a named line of therapy made of components run one after another (e.g. lobectomy, then four cycles of
adjuvant cisplatin/pemetrexed). ``requires``/``excludes`` are biomarker or histology flags (e.g. ``egfr``,
``hr_pos``, ``sclc``); ``since`` keeps drugs out of the record before they were in use. Among eligible plans one
is drawn by weight, so targeted plans (large weights) win whenever their biomarker is present.

>>> plan = choose_plan(FIRST_LINE["lung"][3], {"nsclc", "nonsquamous", "egfr"}, 2020.0, 70.0, 0.5)
>>> plan.name
'Osimertinib'
"""

from __future__ import annotations

from dataclasses import dataclass

from vista.shared.synth.cancers import CANCER_KEYS
from vista.shared.synth.catalog import MEDS, PROCEDURES, check_known

SURGERY, INFUSION, ORAL, RADIATION, CHEMORADIATION, INJECTION, INTRAVESICAL, OBSERVATION, TRANSPLANT, PROCEDURE = (
    "surgery", "infusion", "oral", "radiation", "chemoradiation", "injection", "intravesical", "observation", "transplant", "procedure")


@dataclass(frozen=True, slots=True)
class Component:
    """One block of a treatment line.

    ``every_days`` is the cycle/visit spacing; ``count`` the number of cycles (infusion), weeks (radiation) or
    months (oral, injection, observation); ``continuous`` components run until progression, death or record end.
    """

    kind: str
    label: str
    drugs: tuple[str, ...] = ()
    procedure: str | None = None
    every_days: int = 21
    count: tuple[int, int] = (4, 6)
    continuous: bool = False
    inpatient: bool = False


@dataclass(frozen=True, slots=True)
class Plan:
    """A line of therapy: components in order, intent, eligibility and (for palliative plans) median survival."""

    name: str
    intent: str
    components: tuple[Component, ...]
    weight: float = 1.0
    requires: frozenset[str] = frozenset()
    excludes: frozenset[str] = frozenset()
    since: float = 0.0
    max_age: float = 200.0
    os_months: float | None = None


def surgery(proc: str, label: str, inpatient: bool = True) -> Component:
    return Component(SURGERY, label, procedure=proc, count=(1, 1), inpatient=inpatient)


def chemo(label: str, *drugs: str, every: int = 21, cycles: tuple[int, int] = (4, 6), continuous: bool = False) -> Component:
    return Component(INFUSION, label, drugs, every_days=every, count=cycles, continuous=continuous)


def oral(label: str, *drugs: str, months: tuple[int, int] = (6, 24), continuous: bool = True) -> Component:
    return Component(ORAL, label, drugs, every_days=42, count=months, continuous=continuous)


def radiation(label: str, weeks: tuple[int, int] = (5, 7), sbrt: bool = False) -> Component:
    return Component(RADIATION, label, procedure="sbrt" if sbrt else "rt_delivery", every_days=7, count=weeks)


def chemoradiation(label: str, *drugs: str, weeks: tuple[int, int] = (5, 7)) -> Component:
    return Component(CHEMORADIATION, label, drugs, procedure="rt_delivery", every_days=7, count=weeks)


def injection(label: str, *drugs: str, months: tuple[int, int] = (6, 6), continuous: bool = False) -> Component:
    return Component(INJECTION, label, drugs, procedure="leuprolide_inj", every_days=84, count=months, continuous=continuous)


def observation(label: str, months: tuple[int, int] = (12, 60)) -> Component:
    return Component(OBSERVATION, label, every_days=120, count=months, continuous=True)


def P(name, intent, *components, weight=1.0, requires=(), excludes=(), since=0.0, max_age=200.0, os_months=None) -> Plan:
    return Plan(name, intent, tuple(components), weight, frozenset(requires), frozenset(excludes), since, max_age, os_months)


CUR, PAL = "curative", "palliative"
_LOBE = surgery("lobectomy", "thoracoscopic lobectomy")
_NOT_SCLC = ("sclc",)
_LUNG_EARLY = (
    P("Lobectomy", CUR, _LOBE, weight=3, excludes=_NOT_SCLC),
    P("Stereotactic body radiation therapy", CUR, radiation("SBRT 50 Gy in 5 fractions", (1, 2), sbrt=True), excludes=_NOT_SCLC),
    P("Cisplatin/etoposide with thoracic radiation", CUR, chemoradiation("cisplatin/etoposide with concurrent radiation", "cisplatin", "etoposide"),
      requires=("sclc",)),
)
_LUNG_II = (
    P("Lobectomy then adjuvant cisplatin/pemetrexed", CUR, _LOBE, chemo("adjuvant cisplatin/pemetrexed", "cisplatin", "pemetrexed", cycles=(4, 4)),
      weight=3, requires=("nonsquamous",)),
    P("Lobectomy then adjuvant cisplatin/vinorelbine", CUR, _LOBE, chemo("adjuvant cisplatin/vinorelbine", "cisplatin", "vinorelbine", cycles=(4, 4)),
      excludes=_NOT_SCLC),
    _LUNG_EARLY[2],
)
_LUNG_III = (
    P("Chemoradiation then durvalumab", CUR, chemoradiation("carboplatin/paclitaxel with concurrent radiation", "carboplatin", "paclitaxel"),
      chemo("consolidation durvalumab", "durvalumab", every=28, cycles=(12, 12)), weight=5, since=2018.2, excludes=_NOT_SCLC),
    P("Concurrent chemoradiation", CUR, chemoradiation("carboplatin/paclitaxel with concurrent radiation", "carboplatin", "paclitaxel"), excludes=_NOT_SCLC),
    _LUNG_EARLY[2],
)
_LUNG_IV = (
    P("Osimertinib", PAL, oral("osimertinib 80 mg daily", "osimertinib"), weight=60, requires=("egfr",), since=2016.0, os_months=36),
    P("Alectinib", PAL, oral("alectinib 600 mg twice daily", "alectinib"), weight=60, requires=("alk",), since=2017.9, os_months=60),
    P("Pembrolizumab", PAL, chemo("pembrolizumab", "pembrolizumab", continuous=True), weight=20, requires=("pdl1_high",),
      excludes=("egfr", "alk", "sclc"), since=2016.8, os_months=24),
    P("Carboplatin/pemetrexed/pembrolizumab", PAL, chemo("carboplatin/pemetrexed/pembrolizumab", "carboplatin", "pemetrexed", "pembrolizumab", cycles=(4, 4)),
      chemo("maintenance pemetrexed/pembrolizumab", "pemetrexed", "pembrolizumab", continuous=True), weight=10, requires=("nonsquamous",),
      excludes=("egfr", "alk", "sclc"), since=2018.6, os_months=20),
    P("Carboplatin/paclitaxel/pembrolizumab", PAL, chemo("carboplatin/paclitaxel/pembrolizumab", "carboplatin", "paclitaxel", "pembrolizumab", cycles=(4, 4)),
      chemo("maintenance pembrolizumab", "pembrolizumab", continuous=True), weight=10, requires=("squamous",), since=2018.8, os_months=17),
    P("Carboplatin/pemetrexed", PAL, chemo("carboplatin/pemetrexed", "carboplatin", "pemetrexed", cycles=(4, 6)),
      chemo("maintenance pemetrexed", "pemetrexed", continuous=True), requires=("nonsquamous",), excludes=_NOT_SCLC),
    P("Carboplatin/paclitaxel", PAL, chemo("carboplatin/paclitaxel", "carboplatin", "paclitaxel", cycles=(4, 6)), excludes=_NOT_SCLC),
    P("Carboplatin/etoposide/atezolizumab", PAL, chemo("carboplatin/etoposide/atezolizumab", "carboplatin", "etoposide", "atezolizumab", cycles=(4, 4)),
      chemo("maintenance atezolizumab", "atezolizumab", continuous=True), weight=30, requires=("sclc",), since=2019.2, os_months=12),
    P("Carboplatin/etoposide", PAL, chemo("carboplatin/etoposide", "carboplatin", "etoposide", cycles=(4, 6)), weight=3, requires=("sclc",), os_months=10),
)
_LATER_GENERIC = (
    P("Docetaxel", PAL, chemo("docetaxel", "docetaxel", continuous=True), weight=3),
    P("Gemcitabine", PAL, chemo("gemcitabine", "gemcitabine", continuous=True)),
    P("Paclitaxel", PAL, chemo("weekly paclitaxel", "paclitaxel", every=7, continuous=True)),
)

_HR_ENDO = oral("adjuvant letrozole", "letrozole", months=(36, 60), continuous=False)
_LUMP = surgery("lumpectomy", "lumpectomy with sentinel node biopsy", inpatient=False)
_MAST = surgery("mastectomy", "mastectomy with axillary staging")
_WBRT = radiation("whole-breast radiation", (3, 4))
_BREAST_EARLY = (
    P("Lumpectomy, radiation and letrozole", CUR, _LUMP, _WBRT, _HR_ENDO, weight=5, requires=("hr_pos",), excludes=("her2_pos",)),
    P("Mastectomy and tamoxifen", CUR, _MAST, oral("adjuvant tamoxifen", "tamoxifen", months=(36, 60), continuous=False), weight=2,
      requires=("hr_pos",), excludes=("her2_pos",)),
    P("Neoadjuvant TCHP, surgery and trastuzumab", CUR, chemo("docetaxel/carboplatin/trastuzumab/pertuzumab", "docetaxel", "carboplatin", "trastuzumab",
                                                               "pertuzumab", cycles=(6, 6)), _LUMP,
      chemo("adjuvant trastuzumab", "trastuzumab", cycles=(11, 11)), _WBRT, weight=10, requires=("her2_pos",)),
    P("Neoadjuvant pembrolizumab/carboplatin/paclitaxel then surgery", CUR,
      chemo("pembrolizumab/carboplatin/paclitaxel", "pembrolizumab", "carboplatin", "paclitaxel", cycles=(4, 4)),
      chemo("doxorubicin/cyclophosphamide", "doxorubicin", "cyclophosphamide", cycles=(4, 4)), _MAST, weight=10, requires=("tnbc",), since=2021.5),
    P("Dose-dense AC-T then surgery", CUR, chemo("doxorubicin/cyclophosphamide", "doxorubicin", "cyclophosphamide", every=14, cycles=(4, 4)),
      chemo("paclitaxel", "paclitaxel", every=14, cycles=(4, 4)), _LUMP, _WBRT, weight=3, requires=("tnbc",)),
)
_BREAST_III = (
    P("AC-T, mastectomy, radiation and letrozole", CUR, chemo("doxorubicin/cyclophosphamide", "doxorubicin", "cyclophosphamide", every=14, cycles=(4, 4)),
      chemo("paclitaxel", "paclitaxel", every=14, cycles=(4, 4)), _MAST, radiation("chest wall radiation", (5, 6)), _HR_ENDO, weight=5,
      requires=("hr_pos",), excludes=("her2_pos",)),
    _BREAST_EARLY[2], _BREAST_EARLY[3], _BREAST_EARLY[4],
)
_BREAST_IV = (
    P("Letrozole + palbociclib", PAL, oral("letrozole with palbociclib", "letrozole", "palbociclib"), weight=10, requires=("hr_pos",),
      excludes=("her2_pos",), since=2015.1, os_months=50),
    P("Letrozole", PAL, oral("letrozole", "letrozole"), weight=2, requires=("hr_pos",), excludes=("her2_pos",), os_months=40),
    P("Docetaxel/trastuzumab/pertuzumab", PAL, chemo("docetaxel/trastuzumab/pertuzumab", "docetaxel", "trastuzumab", "pertuzumab", cycles=(6, 6)),
      chemo("maintenance trastuzumab/pertuzumab", "trastuzumab", "pertuzumab", continuous=True), weight=10, requires=("her2_pos",), os_months=55),
    P("Carboplatin/gemcitabine", PAL, chemo("carboplatin/gemcitabine", "carboplatin", "gemcitabine", continuous=True), weight=3, requires=("tnbc",), os_months=16),
    P("Paclitaxel", PAL, chemo("weekly paclitaxel", "paclitaxel", every=7, continuous=True), os_months=20),
)
_BREAST_LATER = (
    P("Fulvestrant", PAL, chemo("fulvestrant", "fulvestrant", every=28, continuous=True), weight=3, requires=("hr_pos",)),
    P("Capecitabine", PAL, oral("capecitabine", "capecitabine"), weight=2),
    P("Olaparib", PAL, oral("olaparib", "olaparib"), weight=10, requires=("brca",), since=2018.0),
    _LATER_GENERIC[2],
)

_ADT6 = injection("leuprolide depot every 12 weeks", "leuprolide", months=(6, 6))
_PROSTATE = (
    (P("Active surveillance", CUR, observation("active surveillance with PSA monitoring", (24, 120)), weight=3, requires=("low_risk",)),
     P("Robotic radical prostatectomy", CUR, surgery("prostatectomy", "robotic radical prostatectomy"), weight=2),
     P("External beam radiation", CUR, radiation("IMRT to the prostate", (6, 8)))),
    (P("Robotic radical prostatectomy", CUR, surgery("prostatectomy", "robotic radical prostatectomy"), weight=3),
     P("Radiation with 6 months of ADT", CUR, radiation("IMRT to the prostate", (6, 8)), _ADT6, weight=2)),
    (P("Radiation with 24 months of ADT", CUR, radiation("IMRT to the prostate and pelvic nodes", (7, 8)),
       injection("leuprolide depot every 12 weeks", "leuprolide", months=(18, 24)), weight=3),
     P("Radical prostatectomy then adjuvant radiation", CUR, surgery("prostatectomy", "robotic radical prostatectomy"), radiation("prostate bed radiation", (6, 7)))),
    (P("ADT + abiraterone", PAL, injection("leuprolide depot every 12 weeks", "leuprolide", continuous=True), oral("abiraterone with prednisone", "abiraterone", "prednisone"),
       weight=5, since=2017.5, os_months=55),
     P("ADT + enzalutamide", PAL, injection("leuprolide depot every 12 weeks", "leuprolide", continuous=True), oral("enzalutamide", "enzalutamide"),
       weight=3, since=2019.9, os_months=55),
     P("ADT + docetaxel", PAL, chemo("docetaxel", "docetaxel", cycles=(6, 6)), injection("leuprolide depot every 12 weeks", "leuprolide", continuous=True),
       weight=2, since=2015.0, os_months=50),
     P("ADT + bicalutamide", PAL, injection("leuprolide depot every 12 weeks", "leuprolide", continuous=True), oral("bicalutamide", "bicalutamide"), os_months=40)),
)
_PROSTATE_LATER = (
    P("Enzalutamide", PAL, oral("enzalutamide", "enzalutamide"), weight=2, since=2012.7),
    P("Docetaxel", PAL, chemo("docetaxel", "docetaxel", cycles=(6, 10))),
    P("Abiraterone", PAL, oral("abiraterone with prednisone", "abiraterone", "prednisone")),
)

_COLECTOMY = surgery("colectomy", "laparoscopic partial colectomy")
_LAR = surgery("low_anterior_resection", "low anterior resection")
_FOLFOX = ("fluorouracil", "leucovorin", "oxaliplatin")
_CRC = (
    (P("Colectomy", CUR, _COLECTOMY, excludes=("rectal",)), P("Low anterior resection", CUR, _LAR, requires=("rectal",))),
    (P("Colectomy", CUR, _COLECTOMY, weight=3, excludes=("rectal",)),
     P("Colectomy then adjuvant capecitabine", CUR, _COLECTOMY, oral("adjuvant capecitabine", "capecitabine", months=(6, 6), continuous=False), excludes=("rectal",)),
     P("Chemoradiation then low anterior resection", CUR, chemoradiation("capecitabine with pelvic radiation", "capecitabine", weeks=(5, 6)), _LAR, requires=("rectal",))),
    (P("Colectomy then adjuvant CAPOX", CUR, _COLECTOMY, chemo("adjuvant capecitabine/oxaliplatin", "capecitabine", "oxaliplatin", cycles=(4, 8)), weight=2,
       excludes=("rectal",)),
     P("Colectomy then adjuvant FOLFOX", CUR, _COLECTOMY, chemo("adjuvant FOLFOX", *_FOLFOX, every=14, cycles=(6, 12)), weight=2, excludes=("rectal",)),
     P("Chemoradiation, low anterior resection, adjuvant FOLFOX", CUR, chemoradiation("capecitabine with pelvic radiation", "capecitabine", weeks=(5, 6)), _LAR,
       chemo("adjuvant FOLFOX", *_FOLFOX, every=14, cycles=(6, 8)), requires=("rectal",))),
    (P("FOLFOX + bevacizumab", PAL, chemo("FOLFOX with bevacizumab", *_FOLFOX, "bevacizumab", every=14, continuous=True), weight=3, os_months=28),
     P("FOLFIRI + bevacizumab", PAL, chemo("FOLFIRI with bevacizumab", "fluorouracil", "leucovorin", "irinotecan", "bevacizumab", every=14, continuous=True), os_months=26),
     P("Pembrolizumab", PAL, chemo("pembrolizumab", "pembrolizumab", continuous=True), weight=15, requires=("dmmr",), since=2020.5, os_months=45)),
)
_CRC_LATER = (
    P("FOLFIRI", PAL, chemo("FOLFIRI", "fluorouracil", "leucovorin", "irinotecan", every=14, continuous=True), weight=2),
    P("Capecitabine", PAL, oral("capecitabine", "capecitabine")),
    P("Irinotecan", PAL, chemo("irinotecan", "irinotecan", continuous=True)),
)

_BLADDER = (
    (P("TURBT then intravesical BCG", CUR, surgery("turbt", "transurethral resection of bladder tumor", inpatient=False),
       Component(INTRAVESICAL, "intravesical BCG induction and maintenance", procedure="bcg", every_days=7, count=(6, 6)), weight=3),
     P("TURBT", CUR, surgery("turbt", "transurethral resection of bladder tumor", inpatient=False))),
    (P("Neoadjuvant gemcitabine/cisplatin then radical cystectomy", CUR, chemo("gemcitabine/cisplatin", "gemcitabine", "cisplatin", cycles=(4, 4)),
       surgery("cystectomy", "radical cystectomy with ileal conduit"), weight=3),
     P("Chemoradiation (cisplatin)", CUR, chemoradiation("weekly cisplatin with bladder radiation", "cisplatin", weeks=(6, 7)))),
)
_BLADDER_IV = (
    P("Gemcitabine/cisplatin", PAL, chemo("gemcitabine/cisplatin", "gemcitabine", "cisplatin", cycles=(4, 6)), weight=3, os_months=14),
    P("Gemcitabine/carboplatin", PAL, chemo("gemcitabine/carboplatin", "gemcitabine", "carboplatin", cycles=(4, 6)), os_months=10),
    P("Pembrolizumab", PAL, chemo("pembrolizumab", "pembrolizumab", continuous=True), since=2017.4, os_months=12),
)

_CERVIX = (
    (P("Radical hysterectomy", CUR, surgery("radical_hysterectomy", "radical hysterectomy with pelvic lymphadenectomy")),),
    (P("Chemoradiation (weekly cisplatin)", CUR, chemoradiation("weekly cisplatin with pelvic radiation and brachytherapy", "cisplatin", weeks=(6, 7))),),
    (P("Chemoradiation (weekly cisplatin)", CUR, chemoradiation("weekly cisplatin with pelvic radiation and brachytherapy", "cisplatin", weeks=(6, 7))),),
    (P("Carboplatin/paclitaxel/bevacizumab", PAL, chemo("carboplatin/paclitaxel/bevacizumab", "carboplatin", "paclitaxel", "bevacizumab", continuous=True),
       weight=2, os_months=17),
     P("Carboplatin/paclitaxel/bevacizumab/pembrolizumab", PAL,
       chemo("carboplatin/paclitaxel/bevacizumab/pembrolizumab", "carboplatin", "paclitaxel", "bevacizumab", "pembrolizumab", continuous=True),
       weight=4, since=2021.8, os_months=24)),
)

_ESOPH_TRI = (chemoradiation("carboplatin/paclitaxel with radiation (CROSS)", "carboplatin", "paclitaxel", weeks=(5, 5)),
              surgery("esophagectomy", "Ivor Lewis esophagectomy"))
_ESOPH = (
    (P("Esophagectomy", CUR, surgery("esophagectomy", "Ivor Lewis esophagectomy")),),
    (P("Trimodality therapy", CUR, *_ESOPH_TRI, weight=2),
     P("Trimodality therapy then adjuvant nivolumab", CUR, *_ESOPH_TRI, chemo("adjuvant nivolumab", "nivolumab", every=14, cycles=(12, 24)), weight=5,
       since=2021.4)),
    (P("Trimodality therapy", CUR, *_ESOPH_TRI, weight=2),
     P("Trimodality therapy then adjuvant nivolumab", CUR, *_ESOPH_TRI, chemo("adjuvant nivolumab", "nivolumab", every=14, cycles=(12, 24)), weight=5,
       since=2021.4),
     P("Definitive chemoradiation", CUR, chemoradiation("carboplatin/paclitaxel with definitive radiation", "carboplatin", "paclitaxel", weeks=(6, 6)))),
    (P("FOLFOX + nivolumab", PAL, chemo("FOLFOX with nivolumab", *_FOLFOX, "nivolumab", every=14, continuous=True), weight=4, since=2021.3, os_months=13),
     P("FOLFOX", PAL, chemo("FOLFOX", *_FOLFOX, every=14, continuous=True), os_months=10),
     P("Carboplatin/paclitaxel", PAL, chemo("carboplatin/paclitaxel", "carboplatin", "paclitaxel", cycles=(4, 6)), os_months=9)),
)
_GI_LATER = (
    P("Paclitaxel", PAL, chemo("weekly paclitaxel", "paclitaxel", every=7, continuous=True), weight=2),
    P("Irinotecan", PAL, chemo("irinotecan", "irinotecan", continuous=True)),
)

_HYST = surgery("hysterectomy", "total laparoscopic hysterectomy with bilateral salpingo-oophorectomy")
_CARBO_PACLI = chemo("carboplatin/paclitaxel", "carboplatin", "paclitaxel", cycles=(6, 6))
_ENDO = (
    (P("Hysterectomy", CUR, _HYST, weight=4, excludes=("high_grade",)), P("Hysterectomy then carboplatin/paclitaxel", CUR, _HYST, _CARBO_PACLI, requires=("high_grade",))),
    (P("Hysterectomy then pelvic radiation", CUR, _HYST, radiation("pelvic radiation", (5, 6))),),
    (P("Hysterectomy then carboplatin/paclitaxel", CUR, _HYST, _CARBO_PACLI),),
    (P("Carboplatin/paclitaxel", PAL, _CARBO_PACLI, os_months=20),
     P("Carboplatin/paclitaxel/pembrolizumab", PAL, chemo("carboplatin/paclitaxel/pembrolizumab", "carboplatin", "paclitaxel", "pembrolizumab", cycles=(6, 6)),
       chemo("maintenance pembrolizumab", "pembrolizumab", every=42, continuous=True), weight=3, since=2023.5, os_months=30)),
)
_ENDO_LATER = (
    P("Pembrolizumab + lenvatinib", PAL, chemo("pembrolizumab", "pembrolizumab", continuous=True), oral("lenvatinib", "lenvatinib"), weight=2, since=2019.7),
    P("Medroxyprogesterone", PAL, oral("medroxyprogesterone", "medroxyprogesterone")),
    _LATER_GENERIC[2],
)

_FLOT = ("fluorouracil", "leucovorin", "oxaliplatin", "docetaxel")
_GASTRIC = (
    (P("Gastrectomy", CUR, surgery("gastrectomy", "total gastrectomy with D2 lymphadenectomy")),),
    (P("Perioperative FLOT with gastrectomy", CUR, chemo("FLOT", *_FLOT, every=14, cycles=(4, 4)), surgery("gastrectomy", "total gastrectomy with D2 lymphadenectomy"),
       chemo("FLOT", *_FLOT, every=14, cycles=(4, 4))),),
    (P("Perioperative FLOT with gastrectomy", CUR, chemo("FLOT", *_FLOT, every=14, cycles=(4, 4)), surgery("gastrectomy", "total gastrectomy with D2 lymphadenectomy"),
       chemo("FLOT", *_FLOT, every=14, cycles=(4, 4))),),
    (P("FOLFOX + nivolumab", PAL, chemo("FOLFOX with nivolumab", *_FOLFOX, "nivolumab", every=14, continuous=True), weight=4, since=2021.3, os_months=14),
     P("FOLFOX + trastuzumab", PAL, chemo("FOLFOX with trastuzumab", *_FOLFOX, "trastuzumab", every=14, continuous=True), weight=10, requires=("her2_pos",), os_months=16),
     P("FOLFOX", PAL, chemo("FOLFOX", *_FOLFOX, every=14, continuous=True), os_months=11)),
)

_DEBULK = surgery("debulking", "cytoreductive surgery")
_OVARY = (
    (P("Cytoreductive surgery then carboplatin/paclitaxel", CUR, _DEBULK, _CARBO_PACLI),),
    (P("Cytoreductive surgery then carboplatin/paclitaxel", CUR, _DEBULK, _CARBO_PACLI),),
    (P("Cytoreductive surgery, carboplatin/paclitaxel, olaparib maintenance", CUR, _DEBULK, _CARBO_PACLI, oral("olaparib maintenance", "olaparib", months=(24, 24),
                                                                                                          continuous=False),
       weight=10, requires=("brca",), since=2018.9),
     P("Cytoreductive surgery, carboplatin/paclitaxel/bevacizumab", CUR, _DEBULK,
       chemo("carboplatin/paclitaxel/bevacizumab", "carboplatin", "paclitaxel", "bevacizumab", cycles=(6, 6)), weight=2),
     P("Cytoreductive surgery then carboplatin/paclitaxel", CUR, _DEBULK, _CARBO_PACLI, weight=2)),
)
_OVARY_LATER = (
    P("Carboplatin/gemcitabine", PAL, chemo("carboplatin/gemcitabine", "carboplatin", "gemcitabine", cycles=(6, 6)), weight=2),
    P("Liposomal doxorubicin", PAL, chemo("doxorubicin", "doxorubicin", every=28, continuous=True)),
    P("Weekly paclitaxel", PAL, chemo("weekly paclitaxel", "paclitaxel", every=7, continuous=True)),
)

_FOLFIRINOX = ("fluorouracil", "leucovorin", "irinotecan", "oxaliplatin")
_WHIPPLE = surgery("whipple", "pancreaticoduodenectomy (Whipple)")
_PANC = (
    (P("Whipple then adjuvant mFOLFIRINOX", CUR, _WHIPPLE, chemo("adjuvant mFOLFIRINOX", *_FOLFIRINOX, every=14, cycles=(12, 12)), weight=3, since=2018.5,
       max_age=78),
     P("Whipple then adjuvant gemcitabine/capecitabine", CUR, _WHIPPLE, chemo("adjuvant gemcitabine with capecitabine", "gemcitabine", "capecitabine", every=28,
                                                                              cycles=(6, 6)))),
    (P("FOLFIRINOX", PAL, chemo("FOLFIRINOX", *_FOLFIRINOX, every=14, continuous=True), weight=2, max_age=76, os_months=14),
     P("Gemcitabine + paclitaxel", PAL, chemo("gemcitabine with nab-paclitaxel", "gemcitabine", "paclitaxel", every=28, continuous=True), weight=2, os_months=11)),
    (P("FOLFIRINOX", PAL, chemo("FOLFIRINOX", *_FOLFIRINOX, every=14, continuous=True), weight=2, max_age=76, os_months=11),
     P("Gemcitabine + paclitaxel", PAL, chemo("gemcitabine with nab-paclitaxel", "gemcitabine", "paclitaxel", every=28, continuous=True), weight=2, os_months=8.5),
     P("Gemcitabine", PAL, chemo("gemcitabine", "gemcitabine", every=28, continuous=True), os_months=6)),
)

_LIVER = (
    (P("Partial hepatectomy", CUR, surgery("hepatectomy", "partial hepatectomy"), weight=2),
     P("Radiofrequency ablation", CUR, Component(PROCEDURE, "radiofrequency ablation", procedure="liver_ablation", count=(1, 1)), weight=2, requires=("hcc",))),
    (P("Transarterial chemoembolization", CUR, Component(PROCEDURE, "transarterial chemoembolization", procedure="tace", every_days=60, count=(1, 3)),
       weight=3, requires=("hcc",)),
     P("Partial hepatectomy", CUR, surgery("hepatectomy", "partial hepatectomy"))),
    (P("Atezolizumab + bevacizumab", PAL, chemo("atezolizumab/bevacizumab", "atezolizumab", "bevacizumab", continuous=True), weight=4, since=2020.4,
       requires=("hcc",), os_months=19),
     P("Sorafenib", PAL, oral("sorafenib", "sorafenib"), requires=("hcc",), os_months=10),
     P("Transarterial chemoembolization", CUR, Component(PROCEDURE, "transarterial chemoembolization", procedure="tace", every_days=60, count=(1, 3)),
       requires=("hcc",)),
     P("Gemcitabine/cisplatin", PAL, chemo("gemcitabine/cisplatin", "gemcitabine", "cisplatin", cycles=(8, 8)), weight=20, requires=("cholangio",), os_months=12)),
    (P("Atezolizumab + bevacizumab", PAL, chemo("atezolizumab/bevacizumab", "atezolizumab", "bevacizumab", continuous=True), weight=4, since=2020.4,
       requires=("hcc",), os_months=16),
     P("Lenvatinib", PAL, oral("lenvatinib", "lenvatinib"), weight=1, since=2018.6, requires=("hcc",), os_months=13),
     P("Sorafenib", PAL, oral("sorafenib", "sorafenib"), requires=("hcc",), os_months=9),
     P("Gemcitabine/cisplatin", PAL, chemo("gemcitabine/cisplatin", "gemcitabine", "cisplatin", cycles=(8, 8)), weight=20, requires=("cholangio",), os_months=11)),
)
_LIVER_LATER = (P("Sorafenib", PAL, oral("sorafenib", "sorafenib"), requires=("hcc",)), P("Lenvatinib", PAL, oral("lenvatinib", "lenvatinib"), requires=("hcc",)),
                P("Fluorouracil/leucovorin/oxaliplatin", PAL, chemo("FOLFOX", *_FOLFOX, every=14, continuous=True)))

_LEUKEMIA = (
    P("Active monitoring", PAL, observation("watch and wait with blood counts", (12, 60)), weight=3, requires=("cll",), os_months=130),
    P("Ibrutinib", PAL, oral("ibrutinib", "ibrutinib"), weight=2, requires=("cll",), since=2016.2, os_months=110),
    P("Bendamustine + rituximab", PAL, chemo("bendamustine/rituximab", "bendamustine", "rituximab", every=28, cycles=(6, 6)), requires=("cll",), os_months=100),
    P("Induction cytarabine + daunorubicin (7+3)", CUR, Component(INFUSION, "7+3 induction", ("cytarabine", "daunorubicin"), every_days=28, count=(1, 1), inpatient=True),
      chemo("high-dose cytarabine consolidation", "cytarabine", every=28, cycles=(3, 4)), weight=3, requires=("aml",), max_age=72),
    P("Azacitidine + venetoclax", PAL, chemo("azacitidine with venetoclax", "azacitidine", "venetoclax", every=28, continuous=True), weight=3, requires=("aml",),
      since=2018.9, os_months=15),
    P("Azacitidine", PAL, chemo("azacitidine", "azacitidine", every=28, continuous=True), requires=("aml",), os_months=10),
    P("Imatinib", PAL, oral("imatinib", "imatinib"), requires=("cml",), os_months=170),
    P("Hyper-CVAD", CUR, chemo("hyper-CVAD", "cyclophosphamide", "vincristine", "doxorubicin", "dexamethasone", cycles=(8, 8)), requires=("all",)),
    P("Azacitidine", PAL, chemo("azacitidine", "azacitidine", every=28, continuous=True), requires=("cmml",), os_months=24),
)
_LEUKEMIA_LATER = (
    P("Venetoclax + rituximab", PAL, oral("venetoclax", "venetoclax"), chemo("rituximab", "rituximab", every=28, cycles=(6, 6)), weight=3, requires=("cll",), since=2018.4),
    P("Azacitidine", PAL, chemo("azacitidine", "azacitidine", every=28, continuous=True), excludes=("cll", "cml")),
    P("Imatinib", PAL, oral("imatinib", "imatinib"), requires=("cml",)),
    P("Ibrutinib", PAL, oral("ibrutinib", "ibrutinib"), requires=("cll",), since=2014.1),
)

_VRD = chemo("bortezomib/lenalidomide/dexamethasone", "bortezomib", "lenalidomide", "dexamethasone", cycles=(4, 4))
_MYELOMA = (
    P("VRd, autologous transplant, lenalidomide maintenance", PAL, _VRD, Component(TRANSPLANT, "autologous stem cell transplant", procedure="stem_cell_transplant",
                                                                                  count=(1, 1), inpatient=True),
      oral("lenalidomide maintenance", "lenalidomide"), weight=3, max_age=70, os_months=90),
    P("VRd then lenalidomide maintenance", PAL, chemo("bortezomib/lenalidomide/dexamethasone", "bortezomib", "lenalidomide", "dexamethasone", cycles=(8, 8)),
      oral("lenalidomide maintenance", "lenalidomide"), weight=2, os_months=60),
)
_MYELOMA_LATER = (P("Cyclophosphamide/bortezomib/dexamethasone", PAL, chemo("CyBorD", "cyclophosphamide", "bortezomib", "dexamethasone", every=28, continuous=True)),)

_RCHOP = chemo("R-CHOP", "rituximab", "cyclophosphamide", "doxorubicin", "vincristine", "prednisone", cycles=(6, 6))
_LYMPHOMA = (
    P("R-CHOP", CUR, _RCHOP, requires=("dlbcl",)),
    P("Active monitoring", PAL, observation("watch and wait", (12, 48)), weight=2, requires=("follicular",), os_months=160),
    P("Bendamustine + rituximab", PAL, chemo("bendamustine/rituximab", "bendamustine", "rituximab", every=28, cycles=(6, 6)), weight=2, requires=("follicular",),
      os_months=150),
    P("ABVD", CUR, chemo("ABVD", "doxorubicin", "bleomycin", "vinblastine", "dacarbazine", every=28, cycles=(4, 6)), requires=("hodgkin",)),
    P("Bendamustine + rituximab", PAL, chemo("bendamustine/rituximab", "bendamustine", "rituximab", every=28, cycles=(6, 6)), requires=("mantle",), os_months=70),
    P("Rituximab", PAL, chemo("weekly rituximab", "rituximab", every=7, cycles=(4, 4)), requires=("mzl",), os_months=150),
)
_LYMPHOMA_LATER = (
    P("R-GemOx", PAL, chemo("rituximab/gemcitabine/oxaliplatin", "rituximab", "gemcitabine", "oxaliplatin", every=14, cycles=(6, 8)), weight=2),
    P("Ibrutinib", PAL, oral("ibrutinib", "ibrutinib"), requires=("mantle",), since=2013.9, weight=5),
    P("Bendamustine + rituximab", PAL, chemo("bendamustine/rituximab", "bendamustine", "rituximab", every=28, cycles=(6, 6))),
)

FIRST_LINE: dict[str, tuple[tuple[Plan, ...], tuple[Plan, ...], tuple[Plan, ...], tuple[Plan, ...]]] = {
    "lung": (_LUNG_EARLY, _LUNG_II, _LUNG_III, _LUNG_IV),
    "breast": (_BREAST_EARLY, _BREAST_EARLY, _BREAST_III, _BREAST_IV),
    "prostate": _PROSTATE,
    "colorectal": _CRC,
    "bladder": (_BLADDER[0], _BLADDER[1], _BLADDER[1], _BLADDER_IV),
    "cervical": _CERVIX,
    "esophageal": _ESOPH,
    "endometrial": _ENDO,
    "gastric": _GASTRIC,
    "ovarian": (_OVARY[0], _OVARY[1], _OVARY[2], _OVARY[2]),
    "pancreatic": (_PANC[0], _PANC[0], _PANC[1], _PANC[2]),
    "liver": _LIVER,
    "leukemia": (_LEUKEMIA,) * 4,
    "myeloma": (_MYELOMA,) * 4,
    "lymphoma": (_LYMPHOMA,) * 4,
}
"""First-line plans per cancer and stage bucket (index 0-3 = stage I-IV)."""

LATER_LINES: dict[str, tuple[Plan, ...]] = {
    "lung": _LATER_GENERIC[:2], "breast": _BREAST_LATER, "prostate": _PROSTATE_LATER, "colorectal": _CRC_LATER, "bladder": _BLADDER_IV[1:] + _LATER_GENERIC[2:],
    "cervical": _LATER_GENERIC[2:], "esophageal": _GI_LATER, "endometrial": _ENDO_LATER, "gastric": _GI_LATER, "ovarian": _OVARY_LATER,
    "pancreatic": _PANC[2], "liver": _LIVER_LATER, "leukemia": _LEUKEMIA_LATER, "myeloma": _MYELOMA_LATER, "lymphoma": _LYMPHOMA_LATER,
}
"""Palliative plans for second and later lines (after progression or recurrence)."""

METASTATIC_FIRST_LINE: dict[str, tuple[Plan, ...]] = {k: FIRST_LINE[k][3] for k in CANCER_KEYS}
"""First-line plans at recurrence after curative treatment (the stage IV plans)."""


def eligible(plan: Plan, flags: set[str] | frozenset[str], year: float, age: float) -> bool:
    return plan.requires <= flags and not (plan.excludes & flags) and plan.since <= year and age <= plan.max_age


def choose_plan(plans: tuple[Plan, ...], flags: set[str] | frozenset[str], year: float, age: float, u: float) -> Plan | None:
    """Draw one eligible plan by weight (``u`` uniform in [0, 1)); None when none is eligible."""
    ok = [p for p in plans if eligible(p, flags, year, age)]
    if not ok:
        return None
    total = sum(p.weight for p in ok)
    acc = 0.0
    for p in ok:
        acc += p.weight / total
        if u < acc:
            return p
    return ok[-1]


def _check() -> None:
    for key in CANCER_KEYS:
        for bucket in FIRST_LINE[key]:
            for plan in bucket:
                owner = f"{key} plan {plan.name!r}"
                for comp in plan.components:
                    check_known(owner, "drug", comp.drugs, MEDS)
                    check_known(owner, "procedure", [comp.procedure] if comp.procedure is not None else [], PROCEDURES)
        for plan in LATER_LINES[key]:
            for comp in plan.components:
                check_known(f"{key} later plan {plan.name!r}", "drug", comp.drugs, MEDS)


_check()
