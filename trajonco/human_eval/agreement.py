"""`HumanEvalReport`: Cohen's kappa between reviewers and between each reviewer and the LLM judge.

Between reviewers, kappa is computed per question kind (event correct/inaccurate, summary faithful/unfaithful,
rubric A/B/tie) over the questions both answered. Against the judge, each reviewer's rubric answers are unblinded
with the key (A/B -> run A/run B of the judge report) and compared with the judge's verdict for that patient and
rubric: the verdict both candidate orders gave, or "tie" when the order changed it (`PairJudgement.consensus`).
Patients the judge did not answer in both orders are counted (``not_judged``), not compared.
"""

from __future__ import annotations

from itertools import combinations
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from trajonco.human_eval.answers import AnswerSet
from trajonco.human_eval.packets import PacketKey
from trajonco.judge.errors import EvaluationInputError, read_json_model
from trajonco.judge.report import JudgeReport
from trajonco.judge.stats import Kappa, cohen_kappa

KINDS = ("event", "summary", "rubric")


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Agreement(_Model):
    """Kappa of two raters on one kind of question."""

    rater_1: str
    rater_2: str
    kind: str
    kappa: Kappa


class ReviewerSummary(_Model):
    reviewer: str
    answered: int
    unanswered: int
    events_correct: float | None = Field(description="share of the events answered that were marked correct")
    summaries_faithful: float | None


class HumanEvalReport(_Model):
    """Agreement figures of one review round."""

    n_packets: int
    reviewers: tuple[ReviewerSummary, ...]
    between_reviewers: tuple[Agreement, ...]
    reviewer_vs_judge: tuple[Agreement, ...] = ()
    judge_model: str | None = None
    not_judged: int = Field(0, description="rubric answers whose patient the judge did not answer in both orders")

    def lines(self) -> list[str]:
        out = [f"{self.n_packets} packets; reviewers: " + ", ".join(
            f"{r.reviewer} ({r.answered} answered, {r.unanswered} blank"
            + (f", {r.events_correct:.0%} of events correct" if r.events_correct is not None else "") + ")"
            for r in self.reviewers)]
        out += [f"kappa {a.rater_1} vs {a.rater_2} [{a.kind}]: {a.kappa}" for a in self.between_reviewers]
        out += [f"kappa {a.rater_1} vs judge {a.rater_2} [{a.kind}]: {a.kappa}" for a in self.reviewer_vs_judge]
        if self.not_judged:
            out.append(f"{self.not_judged} rubric answers not compared with the judge (patient not judged)")
        return out


def _share(values: list[str], positive: str) -> float | None:
    return sum(v == positive for v in values) / len(values) if values else None


def _judge_pairs(answers: AnswerSet, key: PacketKey, judge: JudgeReport) -> tuple[list[Agreement], int]:
    by_path = {judge.run_a.path: "a", judge.run_b.path: "b"}
    key_paths = {r.path for r in key.runs}
    if len(key.runs) != 2 or key_paths != set(by_path):
        raise EvaluationInputError(f"the judge report compares {judge.run_a.path} and {judge.run_b.path}, but the "
                                   f"packets were made from {', '.join(sorted(key_paths))}: use the same two runs")
    verdicts = {(j.subject_id, j.prediction_time, j.cancer): j for j in judge.judgements}
    per_reviewer: dict[str, tuple[list[str], list[str]]] = {}
    not_judged = 0
    for a in answers.answers:
        if a.kind != "rubric":
            continue
        entry = key.entry(a.packet_id)
        if entry is None:
            raise EvaluationInputError(f"{a.file}: row {a.row}: field packet_id: {a.packet_id} is not in the key "
                                       "(a key from another export?)")
        judged = verdicts.get((entry.subject_id, entry.prediction_time, entry.cancer))
        rubric = a.question_id.removeprefix("rubric.")
        verdict = judged.consensus(rubric) if judged is not None else None
        if verdict is None:
            not_judged += 1
            continue
        mine = "tie" if a.answer == "tie" else by_path[entry.sides[a.answer].path]
        first, second = per_reviewer.setdefault(a.reviewer, ([], []))
        first.append(mine)
        second.append(verdict)
    return ([Agreement(rater_1=r, rater_2=judge.judge_model, kind="rubric", kappa=cohen_kappa(x, y))
             for r, (x, y) in sorted(per_reviewer.items())], not_judged)


def agreement_report(answers: AnswerSet, n_packets: int, *, key: PacketKey | None = None,
                     judge: JudgeReport | None = None) -> HumanEvalReport:
    """Kappas between reviewers (per kind) and, given the key and a judge report, of each reviewer vs the judge."""
    table = {(a.reviewer, a.packet_id, a.question_id): a for a in answers.answers}
    reviewers = sorted({a.reviewer for a in answers.answers})
    summaries = []
    for r in reviewers:
        mine = [a for a in answers.answers if a.reviewer == r]
        summaries.append(ReviewerSummary(
            reviewer=r, answered=len(mine), unanswered=answers.unanswered.get(r, 0),
            events_correct=_share([a.answer for a in mine if a.kind == "event"], "correct"),
            summaries_faithful=_share([a.answer for a in mine if a.kind == "summary"], "faithful")))
    between = []
    for r1, r2 in combinations(reviewers, 2):
        for kind in KINDS:
            items = sorted({(a.packet_id, a.question_id) for a in answers.answers if a.kind == kind})
            both = [i for i in items if (r1, *i) in table and (r2, *i) in table]
            if both:
                between.append(Agreement(rater_1=r1, rater_2=r2, kind=kind, kappa=cohen_kappa(
                    [table[(r1, *i)].answer for i in both], [table[(r2, *i)].answer for i in both])))
    vs_judge, not_judged = ([], 0)
    if judge is not None:
        if key is None:
            raise EvaluationInputError("comparing with the judge needs the key (--key) to unblind A and B")
        vs_judge, not_judged = _judge_pairs(answers, key, judge)
    return HumanEvalReport(n_packets=n_packets, reviewers=tuple(summaries), between_reviewers=tuple(between),
                           reviewer_vs_judge=tuple(vs_judge), judge_model=judge.judge_model if judge else None,
                           not_judged=not_judged)


def read_key(path: str | Path) -> PacketKey:
    """The key file of an export (errors name the file)."""
    path = Path(path)
    return read_json_model(path, PacketKey, what="packet key",
                           missing=f"{path}: key file not found (written by `trajonco review-export --key`)")
