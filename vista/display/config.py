"""`DisplayConfig`: every setting of display generation (all of them part of the display's content hash)."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

DEFAULT_GROUP_SIZE = 3
"""Variables per LLM call. Measured on the embedded SmolLM2-135M (8k context) over a 130-event timeline cut to
12k characters (≈5.3k SmolLM2 prompt tokens per call; the view is now fitted to the context window instead): groups of 3 gave 6 valid calls, no re-ask, ≤157 answer
tokens; groups of 5 made the model loop until the 1024-token cap (a truncated answer, a re-ask, 2k answer tokens)."""


class DisplayConfig(BaseModel):
    """Settings of one display build: which variables, how many per call, how much timeline each call sees."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    variables: Path | None = Field(default=None,
                                   description="Variable definitions TOML; None = the packaged thoracic list.")
    group_size: int = Field(default=DEFAULT_GROUP_SIZE, ge=1, le=32, description="Variables asked for in one LLM call.")
    max_events: int | None = Field(default=None, ge=1, description="Most timeline events shown in one call (None: no "
                                   "cap besides the context window). When cut, tumor-board facts (diagnosis, "
                                   "histology, stage, biomarkers) are kept first, then episode anchors, background "
                                   "facts and the most recent events (`vista.toa.timeline_view`).")
    max_chars: int | None = Field(default=None, ge=500, description="Most characters of rendered timeline shown in "
                                  "one call; None fits the model's context window (tokens left after the prompt and "
                                  "the answer; the whole timeline when the window is unknown or ≥64k tokens).")
    token_ratio: float | None = Field(default=None, gt=0, le=4, description="Model tokens per counted (tiktoken "
                                      "cl100k) token when fitting the view; None: 1.3 for the embedded SmolLM2 (its "
                                      "tokenizer splits digits, so dated lines cost more), 1.0 otherwise.")
    summary_note: bool = Field(default=True, description="Make one more call for the summary note.")
    value_max_chars: int = Field(default=200, ge=20, le=2000,
                                 description="Longest value a model may write (schema maxLength).")
    max_cited: int = Field(default=6, ge=1, le=50,
                           description="Most timeline ids one value may cite (schema maxItems).")
    summary_max_chars: int = Field(default=700, ge=50, le=4000,
                                   description="Longest summary note (schema maxLength).")
    max_tokens: int | None = Field(default=None, gt=0, description="Answer token cap per call (None: the gateway's).")
