"""Human evaluation of TrajOnco's answers: blinded review packets, reviewers' answers, Cohen's kappa.

`export_packets` samples patients (seeded) from one or two prediction runs and writes one HTML page per patient,
``packets.json`` and ``answers_template.csv``, with the A/B key in a separate file; `read_answers` validates the
reviewers' CSVs; `agreement_report` gives Cohen's kappa between reviewers and between each reviewer and the LLM
judge (`trajonco.judge`). CLI: ``trajonco review-export`` / ``review-import`` (`trajonco.human_eval.cli.add_parser`).
"""

from trajonco.human_eval.agreement import Agreement, HumanEvalReport, agreement_report, read_key
from trajonco.human_eval.answers import Answer, AnswerSet, read_answers
from trajonco.human_eval.export import ExportSummary, export_packets
from trajonco.human_eval.packets import Packet, PacketKey, PacketSet, Question
from trajonco.human_eval.render import read_packets

__all__ = [
    "Agreement", "Answer", "AnswerSet", "ExportSummary", "HumanEvalReport", "Packet", "PacketKey", "PacketSet",
    "Question", "agreement_report", "export_packets", "read_answers", "read_key", "read_packets",
]
