"""Case–control cohorts for cancer early detection: declarative definitions, phenotype, matching, MEDS labels.

>>> from trajonco.cohorts import load_definition
>>> load_definition("prostate").cancers[0].sex
'M'

Typical use: ``build_cohort(dataset_root, load_definition("lung"), out_dir)`` writes ``labels/test.parquet``,
``labels/train.parquet`` and ``manifest.json`` and returns a `CohortResult` (with ``.explanation``). Any MEDS spelling
works: codes are read through the dataset's coding profile (`vista.shared.coding`, detected unless ``profile=`` is given)
and definitions list ICD-10-CM, ICD-9-CM, SNOMED CT and free-pattern code sets.
"""

from trajonco.cohorts.builder import LABELS_SCHEMA, CohortResult, build_cohort
from trajonco.cohorts.definition import CancerCodes, CohortDefinition, builtin_names, load_definition
from trajonco.cohorts.coding import CodingChoice
from trajonco.cohorts.errors import CohortDataError, CohortDefinitionError, CohortError, EmptyCohortError
from trajonco.cohorts.explain import CohortExplanation
from trajonco.cohorts.manifest import CohortManifest
from trajonco.cohorts.source import open_events, scan_events

__all__ = [
    "LABELS_SCHEMA",
    "CancerCodes",
    "CodingChoice",
    "CohortDataError",
    "CohortDefinition",
    "CohortDefinitionError",
    "CohortError",
    "CohortExplanation",
    "CohortManifest",
    "CohortResult",
    "EmptyCohortError",
    "build_cohort",
    "builtin_names",
    "load_definition",
    "open_events",
    "scan_events",
]
