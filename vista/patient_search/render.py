"""Plain-text tables of `vista similar` and `vista cohort-query` results (and their JSON forms)."""

from __future__ import annotations

import json

from vista.patient_search.evaluate import QueryResult
from vista.patient_search.similarity import Method, Neighbour


def _table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths)), "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in rows]
    return "\n".join(lines)


def similar_text(subject_id: int, method: Method, neighbours: list[Neighbour]) -> str:
    """The ranking as a table: rank, subject, score, the shared tokens that weigh most."""
    rows = [[str(rank), str(n.subject_id), f"{n.score:.3f}", ", ".join(n.shared)]
            for rank, n in enumerate(neighbours, 1)]
    title = f"patients most similar to subject {subject_id} (method {method.value})"
    return title + "\n" + _table(["rank", "subject", "score", "shared (most specific first)"], rows)


def similar_json(subject_id: int, method: Method, neighbours: list[Neighbour]) -> str:
    return json.dumps({"subject_id": subject_id, "method": method.value,
                       "neighbours": [{"subject_id": n.subject_id, "score": n.score, "shared": list(n.shared)}
                                      for n in neighbours]}, indent=2)


def query_text(result: QueryResult) -> str:
    """Matching subjects, one column per term: the evidence node, its date and how many nodes matched."""
    names = [t.name for t in result.query.terms]
    rows = []
    for match in result.matches:
        cells = [str(match.subject_id)]
        for item in match.evidence:
            when = item.time.date().isoformat() if item.time else "static"
            more = f" (+{item.matches - 1})" if item.matches > 1 else ""
            cells.append(f"{item.node_id} {when}{more}")
        rows.append(cells)
    head = (f"{len(result.matches)} of {result.patients} patient(s) match"
            + (f" ({result.text_checked} graph(s) read for text terms)" if result.text_checked else ""))
    return head + ("\n" + _table(["subject", *names], rows) if rows else "")


def query_json(result: QueryResult) -> str:
    return json.dumps({"query": result.query.model_dump(mode="json"), "patients": result.patients,
                       "matches": [{"subject_id": m.subject_id, "evidence": [
                           {"term": e.term, "node_id": e.node_id, "code": e.code,
                            "time": e.time.isoformat() if e.time else None, "matches": e.matches}
                           for e in m.evidence]} for m in result.matches]}, indent=2)
