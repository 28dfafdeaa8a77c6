"""The oncology course of each case, written into the MEDS data: work-up, diagnosis, staging, biomarkers, treatment
lines, response assessments, progression, surveillance, hospice and death -- plus rule-out work-ups of non-cases.

This is the only per-subject Python loop of the generator (cases are a minority and have rich, structured stories).
Every fact the ground truth states is written as rows here and the rows are tagged, so the truth can name the event
ids that carry it once the shard is sorted. Bulk content of these visits (vitals, labs, chronic codes) is added
later by the vectorized visit engine.

Modules, in the order of the story: `case` (the course's state and shared rows), `disease`, `workup`, `traps`,
`diagnosis`, `staging`, `treatment` and `components`, `follow_up`; `cases` runs them for every case, `rule_outs`
writes the non-cases' work-ups; `writer` (rows and tags), `truth` (what was written), `draws` (seeded helpers).
"""

from vista.shared.synth.course.cases import write_case_courses
from vista.shared.synth.course.rule_outs import write_rule_outs
from vista.shared.synth.course.truth import CaseTruth, RuleOutTruth
from vista.shared.synth.course.writer import CourseWriter

__all__ = ["CaseTruth", "CourseWriter", "RuleOutTruth", "write_case_courses", "write_rule_outs"]
