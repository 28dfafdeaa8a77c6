"""VISTA display generation: the tumor-board variables and a summary note, from the TOA timeline and the MEDS Graph.

`build_display` fills demographics, height/weight and medications from the graph's structured data (origin
"structured") and every other variable from the timeline's events and episodes (a view fitted to the model's context
window, `vista.toa.timeline_view`), a few variables per LLM call (origin "llm"; a failed call leaves
"Not available" with origin "failed"); every cited timeline id is checked and mapped to the MEDS Graph events it
rests on, and an answer left citing none is shown as "Not found" (origin "uncited", `vista.display.citations`). `DisplayStore` persists ``<root>/display/<sid>.json`` keyed by a content hash so an unchanged patient
costs no call; `render_display` / `display_markdown` show a display to people.
"""

from vista.display.config import DEFAULT_GROUP_SIZE, DisplayConfig
from vista.display.generate import DisplayBuild, DisplayStats, build_display, generate_display
from vista.display.hashing import display_hash
from vista.display.model import (
    Comparison,
    DisplayError,
    TumorBoardDisplay,
    VariableSpec,
    VariableValue,
    load_variables,
)
from vista.display.render import display_markdown, render_display
from vista.display.store import DisplayStore
from vista.display.structured import STRUCTURED_VARIABLES, demographics_value, height_weight_value, medications_value

__all__ = [
    "Comparison", "DEFAULT_GROUP_SIZE", "DisplayBuild", "DisplayConfig", "DisplayError", "DisplayStats", "DisplayStore",
    "STRUCTURED_VARIABLES", "TumorBoardDisplay", "VariableSpec", "VariableValue", "build_display",
    "demographics_value", "display_hash", "display_markdown", "generate_display", "height_weight_value",
    "load_variables", "medications_value", "render_display",
]
