"""VISTA per patient, end to end: graph source → MEDS Graph in a store → TOA timeline → tumor-board display → a
typed row — the twin of `trajonco.pipeline`, used by the `vista` commands and by the cohort job's actors
(`jobs.vista_actor`, which adds only the wiring: blocks, threads, slots, part files).

- `vista.pipeline.config`: `PipelineConfig` (the stages and their settings), `resolve_stages`;
- `vista.pipeline.stages`: the two LLM stages (`timeline_stage`, `display_stage`), each stored and skipped when
  unchanged;
- `vista.pipeline.patient`: `TaskPipeline`, one task through every stage as a `PatientRun`;
- `vista.pipeline.rows`: the `VistaRow` it ends in, its arrow schemas and retry class.
"""

from vista.pipeline.config import STAGES, PipelineConfig, Stage, StageChoiceError, resolve_stages
from vista.pipeline.patient import PatientRun, TaskPipeline
from vista.pipeline.rows import VISTA_PART_SCHEMA, VISTA_SCHEMA, VistaRow, vista_part_record
from vista.pipeline.stages import StageOutcome, display_stage, timeline_stage

__all__ = [
    "STAGES", "VISTA_PART_SCHEMA", "VISTA_SCHEMA", "PatientRun", "PipelineConfig", "Stage", "StageChoiceError",
    "StageOutcome", "TaskPipeline", "VistaRow", "display_stage", "resolve_stages", "timeline_stage",
    "vista_part_record",
]
