"""Seeded synthetic EHRs for the 15 TrajOnco cancers, written as a MEDS dataset with its ground truth.

``generate(SynthConfig(n_subjects=N, seed=S), out_dir)`` writes::

    data/{train,tuning,held_out}/<shard>.parquet   MEDS rows (sorted by subject, time; static rows first)
    metadata/codes.parquet                          every code with description, parent_codes and unit
    metadata/dataset.json, metadata/subject_splits.parquet, metadata/synth_config.json
    ground_truth/oncology.jsonl                     one OncologyRecord per cancer patient, facts tied to event ids
    ground_truth/subjects.parquet                   per subject: cancer, phenotype index date, exclusion, trap flags

Modules: `catalog` (codes), `conditions` (risk factors), `cancers` (the 15 profiles and their code lists),
`population`, `signals`, `reasons`, `trajectories` (background care), `course` (cases' courses, one module per step), `regimens`,
`biomarkers`, `notes`, `ground_truth` (phenotype reference and truth models), `generator` (shards and workers).

>>> from vista.shared.synth import SynthConfig, generate
>>> SynthConfig(n_subjects=100, seed=0).case_fraction
0.25
"""

from vista.shared.synth.config import SplitFractions, SynthConfig
from vista.shared.synth.generator import SynthOutputError, SynthShardError, SynthSummary, generate
from vista.shared.synth.summary_table import summary_table

__all__ = ["SplitFractions", "SynthConfig", "SynthOutputError", "SynthShardError", "SynthSummary", "generate", "summary_table"]
