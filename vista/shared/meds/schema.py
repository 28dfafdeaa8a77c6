"""Column names, arrow types and layout of a MEDS 0.4 dataset, and the code vocabulary our tools rely on.

The types come from the `meds` package so the project follows the standard rather than restating it.
"""

from __future__ import annotations

import meds
import pyarrow as pa

SUBJECT_ID = "subject_id"
TIME = "time"
CODE = "code"
NUMERIC_VALUE = "numeric_value"
TEXT_VALUE = "text_value"

DATA_SCHEMA: pa.Schema = meds.DataSchema.schema()
"""subject_id int64, time timestamp[us], code string, numeric_value float32, text_value large_string."""

LABEL_SCHEMA: pa.Schema = meds.LabelSchema.schema()
CODE_METADATA_SCHEMA: pa.Schema = meds.CodeMetadataSchema.schema()
SUBJECT_SPLIT_SCHEMA: pa.Schema = meds.SubjectSplitSchema.schema()

DATA_DIR = meds.data_subdirectory  # "data"
CODES_FILE = meds.code_metadata_filepath  # "metadata/codes.parquet"
DATASET_FILE = meds.dataset_metadata_filepath  # "metadata/dataset.json"
SPLITS_FILE = meds.subject_splits_filepath  # "metadata/subject_splits.parquet"

BIRTH_CODE = meds.birth_code  # "MEDS_BIRTH"
DEATH_CODE = meds.death_code  # "MEDS_DEATH"
TRAIN_SPLIT = meds.train_split
TUNING_SPLIT = meds.tuning_split
HELD_OUT_SPLIT = meds.held_out_split

# Code prefixes (vocabulary "//" value) used by the synthetic generator and understood by the timeline renderer.
SEP = "//"
ENCOUNTER_PREFIX = "ENCOUNTER"  # ENCOUNTER//AMB, ENCOUNTER//ED, ENCOUNTER//IMP: one per visit
GENDER_PREFIX = "GENDER"  # static: GENDER//F, GENDER//M
RACE_PREFIX = "RACE"  # static: RACE//White ...
ETHNICITY_PREFIX = "ETHNICITY"  # static: ETHNICITY//Hispanic or Latino ...
ICD10CM = "ICD10CM"
ICD9CM = "ICD9CM"
LOINC = "LOINC"
RXNORM = "RXNORM"
CPT = "CPT"
HCPCS = "HCPCS"
SNOMED = "SNOMED"
NOTE_PREFIX = "NOTE"  # NOTE//PROGRESS, NOTE//RADIOLOGY, NOTE//PATHOLOGY with the text in text_value


def vocabulary(code: str) -> str:
    """The vocabulary part of a code: ``vocabulary("ICD10CM//C34.11") == "ICD10CM"``; codes without "//" are their own."""
    head, sep, _ = code.partition(SEP)
    return head if sep else code


def code_value(code: str) -> str:
    """The value part of a code: ``code_value("ICD10CM//C34.11") == "C34.11"``."""
    _, sep, tail = code.partition(SEP)
    return tail if sep else code
