"""Event-definition profiles: which timeline event types (and subtypes) the extraction sub-agents may emit.

A profile is a TOML file (``vista/toa/profiles/thoracic.toml`` is the default) so another specialty only needs
a new file. Flags on a type drive the deterministic stages: ``imaging`` (filled by the radiology safety net),
``background`` (the baseline episode), ``starts_line``/``ends_line`` (treatment-line episodes) and ``post_oncological`` (hospice and the like).

>>> p = load_profile()
>>> p.name, p.type_names[:3], p.imaging_type
('thoracic', ('background', 'diagnosis', 'staging'), 'imaging')
>>> p.get("progression").ends_line
True
"""

from __future__ import annotations

from functools import cached_property
from importlib import resources
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, model_validator

from vista.toa.errors import ProfileError
from vista.shared.tomlmodel import parse_toml_model

DEFAULT_PROFILE = "thoracic"
OTHER_SUBTYPE = "other"


class EventType(BaseModel):
    """One event type of a profile: its name, a one-line definition for the prompt, and its subtypes."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(pattern=r"^[a-z][a-z0-9_]{0,31}$", description="Identifier used in the timeline.")
    definition: str = Field(min_length=1, max_length=300, description="What counts as this type (shown to the model).")
    subtypes: tuple[str, ...] = Field(default=(), description="Allowed refinements; 'other' is always allowed too.")
    imaging: bool = Field(default=False, description="The type the radiology safety net adds verified studies as.")
    background: bool = Field(default=False, description="Pre-cancer context (smoking, comorbidities): baseline episode.")
    starts_line: bool = Field(default=False, description="Treatment that opens a treatment-line episode.")
    ends_line: bool = Field(default=False, description="An event that closes the current treatment line (kept in it).")
    post_oncological: bool = Field(default=False, description="Opens the post-oncological episode (hospice...).")


class EventProfile(BaseModel):
    """A named set of event types (at least one; names unique; exactly one imaging type)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1, max_length=64)
    description: str = Field(default="", max_length=300)
    types: tuple[EventType, ...] = Field(min_length=1)

    @model_validator(mode="after")
    def _consistent(self) -> EventProfile:
        names = [t.name for t in self.types]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate type names in {names}")
        if sum(t.imaging for t in self.types) != 1:
            raise ValueError("exactly one type must set imaging = true (the radiology safety net's type)")
        return self

    @cached_property
    def type_names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.types)

    @cached_property
    def imaging_type(self) -> str:
        return next(t.name for t in self.types if t.imaging)

    def get(self, name: str) -> EventType:
        for t in self.types:
            if t.name == name:
                return t
        raise KeyError(f"profile {self.name!r} has no event type {name!r} (types: {', '.join(self.type_names)})")

    def subtypes_of(self, name: str) -> tuple[str, ...]:
        """The allowed subtypes of ``name`` ('other' included)."""
        subs = self.get(name).subtypes
        return subs if OTHER_SUBTYPE in subs else (*subs, OTHER_SUBTYPE)


def load_profile(source: str | Path = DEFAULT_PROFILE) -> EventProfile:
    """A packaged profile by name (``"thoracic"``) or a profile TOML file by path."""
    if isinstance(source, Path) or str(source).endswith(".toml"):
        path = Path(source)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ProfileError(f"{path}: cannot read event-definition profile ({exc.strerror})") from None
        where = str(path)
    else:
        packaged = resources.files("vista.toa").joinpath("profiles", f"{source}.toml")
        if not packaged.is_file():
            raise ProfileError(f"no packaged event-definition profile named {source!r} (vista/toa/profiles/)")
        text, where = packaged.read_text(encoding="utf-8"), f"vista/toa/profiles/{source}.toml"
    return parse_toml_model(text, where, EventProfile, ProfileError)
