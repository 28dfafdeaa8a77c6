"""Errors of the graph layer: bad patient input (MEDS record or XML document) and unusable graph files or stores.

>>> str(GraphInputError("p7.xml", "time '2300-01-01' is after 2100-01-01", patient="7", field="time", element="event e4"))
"p7.xml: patient 7: event e4: field 'time': time '2300-01-01' is after 2100-01-01"
"""

from __future__ import annotations

from vista.shared.errors import UserError


def _location(source: str, patient: str | None, element: str | None, field: str | None, problem: str) -> str:
    parts = [source]
    if patient is not None:
        parts.append(f"patient {patient}")
    if element is not None:
        parts.append(element)
    if field is not None:
        parts.append(f"field {field!r}")
    parts.append(problem)
    return ": ".join(parts)


class GraphInputError(ValueError, UserError):
    """A patient cannot become a graph: names the source (shard or XML file), the patient, the element and the field."""

    def __init__(self, source: str, problem: str, *, patient: str | None = None, field: str | None = None,
                 element: str | None = None):
        self.source = str(source)
        self.problem = problem
        self.patient = patient
        self.field = field
        self.element = element
        super().__init__(_location(self.source, patient, element, field, problem))

    def __reduce__(self):  # keyword-only arguments: teach pickle (Ray ships exceptions between processes)
        return (_rebuild, (type(self), self.source, self.problem, self.patient, self.field, self.element))

    @classmethod
    def at_element(cls, source: str, problem: str, node=None, *, patient: str | None = None, field: str | None = None,
                   event_id: str | None = None) -> GraphInputError:
        """The error for an XML element (an lxml node): named by its event id and line, or by its line and tag."""
        if event_id:
            element = f"event {event_id} (line {node.sourceline})" if node is not None else f"event {event_id}"
        elif node is not None:
            element = f"line {node.sourceline} <{node.tag}>"
        else:
            element = None
        return cls(source, problem, patient=patient, field=field, element=element)


class GraphFileError(ValueError, UserError):
    """A GraphML file or a graph store cannot be read: names the file and what is wrong with it."""


def _rebuild(cls, source, problem, patient, field, element):
    return cls(source, problem, patient=patient, field=field, element=element)
