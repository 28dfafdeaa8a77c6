"""A small hand-made thoracic-oncology patient graph for the TOA tests (every id and date known in advance)."""

from __future__ import annotations

from datetime import datetime

from vista.graph import PatientGraph, build_graph
from vista.shared.records import CodeCatalog, CodeInfo, Event, PatientRecord

CATALOG = CodeCatalog([
    CodeInfo("CPT//71260", "Computed tomography, thorax, with contrast material"),
    CodeInfo("CPT//32405", "Biopsy, lung or mediastinum, percutaneous needle"),
    CodeInfo("ICD10CM//C34.11", "Malignant neoplasm of upper lobe, right bronchus or lung"),
    CodeInfo("RXNORM//1736854", "pembrolizumab"),
    CodeInfo("LOINC//718-7", "Hemoglobin", unit="g/dL"),
    CodeInfo("SNOMED//8517006", "Ex-smoker"),
])

ROWS = [
    (None, "GENDER//M", None, None),                                               # e0
    (datetime(1950, 1, 1), "MEDS_BIRTH", None, None),                              # e1
    (datetime(2020, 1, 6, 9), "ENCOUNTER//AMB", None, None),                       # e2  baseline visit
    (datetime(2020, 1, 6, 9), "SNOMED//8517006", None, None),                      # e3
    (datetime(2020, 1, 6, 9), "LOINC//718-7", 13.1, None),                         # e4
    (datetime(2020, 3, 2, 8), "ENCOUNTER//AMB", None, None),                       # e5  CT 1
    (datetime(2020, 3, 2, 8), "CPT//71260", None, None),                           # e6
    (datetime(2020, 3, 2, 9), "NOTE//RADIOLOGY", None,
     "Findings: 3.1 cm spiculated right upper lobe mass.\nImpression: suspicious for primary lung cancer."),  # e7
    (datetime(2020, 3, 10, 8), "ENCOUNTER//AMB", None, None),                      # e8  biopsy
    (datetime(2020, 3, 10, 8), "CPT//32405", None, None),                          # e9
    (datetime(2020, 3, 10, 9), "ICD10CM//C34.11", None, None),                     # e10
    (datetime(2020, 3, 10, 10), "NOTE//PATHOLOGY", None,
     "Final diagnosis: adenocarcinoma of the lung.\nComment: EGFR negative, PD-L1 80%."),  # e11
    (datetime(2020, 4, 1, 8), "ENCOUNTER//AMB", None, None),                       # e12 therapy starts
    (datetime(2020, 4, 1, 8), "RXNORM//1736854", None, None),                      # e13
    (datetime(2020, 4, 1, 9), "ICD10CM//C34.11", None, None),                      # e14
    (datetime(2020, 7, 1, 8), "ENCOUNTER//AMB", None, None),                       # e15 CT 2 (the one to plant missing)
    (datetime(2020, 7, 1, 8), "CPT//71260", None, None),                           # e16
    (datetime(2020, 7, 1, 9), "NOTE//RADIOLOGY", None,
     "Findings: mass now 4.5 cm, new liver lesions.\nImpression: progression of disease."),  # e17
    (datetime(2020, 9, 1, 8), "ENCOUNTER//AMB", None, None),                       # e18 hospice
    (datetime(2020, 9, 1, 9), "NOTE//PROGRESS", None,
     "Assessment: declining, ECOG 3.\nPlan: enrolled in hospice, comfort care."),  # e19
]

NOTE_IDS = ("e7", "e11", "e17", "e19")
CLINICAL_IDS = ("e3", "e4", "e6", "e7", "e9", "e10", "e11", "e13", "e14", "e16", "e17", "e19")


def toa_graph() -> PatientGraph:
    record = PatientRecord(21, "data/train/0.parquet", 500, [Event(f"e{k}", *row) for k, row in enumerate(ROWS)])
    return build_graph(record, CATALOG)
