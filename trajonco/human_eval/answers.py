"""Read reviewers' answers CSVs against the exported packets, with one clear error per problem (file, row, field).

Rows are numbered as a spreadsheet shows them (the header is row 1). A blank ``answer`` is an unanswered question
(counted per reviewer, not an error); anything else must be one of the question's choices (case and surrounding
spaces ignored). The same reviewer answering the same question twice is an error unless the answers agree.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from trajonco.human_eval.packets import PacketSet, Question
from trajonco.judge.errors import EvaluationInputError

REQUIRED = ("packet_id", "question_id", "reviewer", "answer")


class Answer(BaseModel):
    """One reviewer's answer to one question."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    reviewer: str
    packet_id: str
    question_id: str
    kind: str
    answer: str
    note: str = ""
    file: str
    row: int


class AnswerSet(BaseModel):
    """Every answer read, and the questions each reviewer left blank."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    answers: tuple[Answer, ...]
    unanswered: dict[str, int]

    @property
    def reviewers(self) -> list[str]:
        return sorted({a.reviewer for a in self.answers} | set(self.unanswered))


def _where(path: Path, row: int, field: str) -> str:
    return f"{path}: row {row}: field {field}"


def read_answers(paths: Iterable[str | Path], packets: PacketSet) -> AnswerSet:
    """Every answered row of the CSV files, validated against ``packets``."""
    questions: dict[tuple[str, str], Question] = {(p.packet_id, q.question_id): q for p in packets.packets
                                                  for q in p.questions}
    known = {p.packet_id for p in packets.packets}
    seen: dict[tuple[str, str, str], Answer] = {}
    unanswered: dict[str, int] = {}
    for path in map(Path, paths):
        if not path.is_file():
            raise EvaluationInputError(f"{path}: answers file not found")
        with path.open(newline="", encoding="utf-8-sig") as handle:
            reader = csv.DictReader(handle)
            missing = [c for c in REQUIRED if c not in (reader.fieldnames or [])]
            if missing:
                raise EvaluationInputError(f"{path}: row 1: missing column(s) {', '.join(missing)} (the header of "
                                           "answers_template.csv is needed)")
            for number, row in enumerate(reader, start=2):
                values = {k: (row.get(k) or "").strip() for k in (*REQUIRED, "note")}
                if not any(values[k] for k in REQUIRED):
                    continue  # an empty line
                if values["packet_id"] not in known:
                    raise EvaluationInputError(f"{_where(path, number, 'packet_id')}: unknown packet "
                                               f"{values['packet_id']!r} (not in this export)")
                question = questions.get((values["packet_id"], values["question_id"]))
                if question is None:
                    raise EvaluationInputError(f"{_where(path, number, 'question_id')}: packet {values['packet_id']} "
                                               f"has no question {values['question_id']!r}")
                if not values["reviewer"]:
                    if values["answer"]:
                        raise EvaluationInputError(f"{_where(path, number, 'reviewer')}: an answer without a "
                                                   "reviewer name")
                    unanswered["(no reviewer)"] = unanswered.get("(no reviewer)", 0) + 1
                    continue
                if not values["answer"]:
                    unanswered[values["reviewer"]] = unanswered.get(values["reviewer"], 0) + 1
                    continue
                choice = next((c for c in question.choices if c.lower() == values["answer"].lower()), None)
                if choice is None:
                    raise EvaluationInputError(f"{_where(path, number, 'answer')}: {values['answer']!r} is not one "
                                               f"of {', '.join(question.choices)}")
                answer = Answer(reviewer=values["reviewer"], packet_id=values["packet_id"],
                                question_id=values["question_id"], kind=question.kind, answer=choice,
                                note=values["note"], file=str(path), row=number)
                key = (answer.reviewer, answer.packet_id, answer.question_id)
                earlier = seen.get(key)
                if earlier is not None and earlier.answer != answer.answer:
                    raise EvaluationInputError(f"{_where(path, number, 'answer')}: reviewer {answer.reviewer!r} "
                                               f"answered {answer.packet_id} {answer.question_id} twice, differently "
                                               f"({earlier.answer!r} in {earlier.file} row {earlier.row})")
                seen[key] = answer
    if not seen:
        raise EvaluationInputError("no answered question in " + ", ".join(map(str, paths)))
    return AnswerSet(answers=tuple(seen.values()), unanswered=unanswered)
