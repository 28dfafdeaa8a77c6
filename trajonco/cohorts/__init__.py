"""Case–control cohorts for cancer early detection: declarative definitions, phenotype, matching, MEDS labels.

>>> from trajonco.cohorts import load_definition
>>> load_definition("prostate").cancers[0].sex
'M'

Typical use: ``build_cohort(dataset_root, load_definition("lung"), out_dir)`` writes ``labels/test.parquet``,
``labels/train.parquet`` and ``manifest.json`` and returns a `CohortResult`.
"""

from trajonco.cohorts.builder import LABELS_SCHEMA, CohortResult, build_cohort
from trajonco.cohorts.definition import CancerCodes, CohortDefinition, builtin_names, load_definition
from trajonco.cohorts.errors import CohortDataError, CohortDefinitionError, CohortError, EmptyCohortError
from trajonco.cohorts.manifest import CohortManifest
from trajonco.cohorts.source import scan_events

__all__ = [
    "LABELS_SCHEMA",
    "CancerCodes",
    "CohortDataError",
    "CohortDefinition",
    "CohortDefinitionError",
    "CohortError",
    "CohortManifest",
    "CohortResult",
    "EmptyCohortError",
    "build_cohort",
    "builtin_names",
    "load_definition",
    "scan_events",
]
