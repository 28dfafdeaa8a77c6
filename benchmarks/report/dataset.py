"""The dataset a report reads: the user's MEDS dataset, or the synthetic one, generated once and then reused.

A synthetic dataset is reused when ``synth_config.json`` in its folder equals the configuration asked for (the
generator is deterministic, so the same configuration means the same bytes).
"""

from __future__ import annotations

import time

from pydantic import BaseModel, Field

from vista.shared.atomic import atomic_write_text
from benchmarks.report.errors import ReportInputError
from benchmarks.report.settings import ReportSettings
from vista.shared.meds.reader import MedsDataset
from vista.shared.synth import SplitFractions, SynthConfig, generate

STAMP = "synth_config.json"


class DatasetSource(BaseModel):
    """Where the report's MEDS data came from and what obtaining it cost."""

    root: str
    synthetic: bool
    generated_now: bool = Field(description="False when an existing dataset was reused")
    seconds: float = Field(description="generation time (0 when reused or given)")
    subjects: int | None = None
    rows: int | None = None
    config: SynthConfig | None = None


def synth_config(settings: ReportSettings) -> SynthConfig:
    """The generator configuration of a report: its size and seed, and the held-out share split 5:1 for training."""
    held_out = settings.synth_held_out
    rest = 1.0 - held_out
    splits = SplitFractions(train=round(rest * 5 / 6, 6), tuning=round(1.0 - held_out - round(rest * 5 / 6, 6), 6),
                            held_out=held_out)
    return SynthConfig(n_subjects=settings.synth_subjects, seed=settings.synth_seed, workers=2, splits=splits)


def ensure_dataset(settings: ReportSettings) -> DatasetSource:
    """The given dataset (checked to open), or the synthetic one (generated unless the same config exists)."""
    root = settings.dataset_root
    if settings.dataset is not None:
        if not root.exists():
            raise ReportInputError(str(root), "MEDS dataset not found")
        MedsDataset(root)  # a folder without data fails here, naming it
        return DatasetSource(root=str(root), synthetic=False, generated_now=False, seconds=0.0)
    config = synth_config(settings)
    stamp = root / STAMP
    wanted = config.model_dump_json()
    if stamp.is_file() and stamp.read_text(encoding="utf-8") == wanted and (root / "data").is_dir():
        return DatasetSource(root=str(root), synthetic=True, generated_now=False, seconds=0.0,
                             subjects=config.n_subjects, config=config)
    started = time.perf_counter()
    summary = generate(config, root, progress=False, overwrite=True)
    seconds = time.perf_counter() - started
    atomic_write_text(stamp, wanted)
    return DatasetSource(root=str(root), synthetic=True, generated_now=True, seconds=round(seconds, 2),
                         subjects=summary.subjects, rows=summary.rows, config=config)
