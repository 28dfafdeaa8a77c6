"""Human evaluation of TrajOnco's answers: blinded review packets, reviewers' answers, Cohen's kappa.

`export_packets` samples patients (seeded) from one or two prediction runs and writes one HTML page per patient,
``packets.json`` and ``answers_template.csv``, with the A/B key in a separate file; `read_answers` validates the
reviewers' CSVs; `agreement_report` gives Cohen's kappa between reviewers and between each reviewer and the LLM
judge (`trajonco.judge`). CLI: ``trajonco review-export`` / ``review-import`` (`trajonco.human_eval.cli.add_parser`).

Names load on first use (module ``__getattr__``), so the CLI's parser imports nothing heavy.
"""

from __future__ import annotations

from vista.shared.lazy import lazy_attributes

_EXPORTS = {
    "Agreement": "trajonco.human_eval.agreement",
    "Answer": "trajonco.human_eval.answers",
    "AnswerSet": "trajonco.human_eval.answers",
    "ExportSummary": "trajonco.human_eval.export",
    "HumanEvalReport": "trajonco.human_eval.agreement",
    "Packet": "trajonco.human_eval.packets",
    "PacketKey": "trajonco.human_eval.packets",
    "PacketSet": "trajonco.human_eval.packets",
    "Question": "trajonco.human_eval.packets",
    "agreement_report": "trajonco.human_eval.agreement",
    "export_packets": "trajonco.human_eval.export",
    "read_answers": "trajonco.human_eval.answers",
    "read_key": "trajonco.human_eval.agreement",
    "read_packets": "trajonco.human_eval.render",
}

__all__ = sorted(_EXPORTS)

__getattr__ = lazy_attributes(__name__, _EXPORTS)
