"""VISTA Architect beside the layer both systems share.

`vista.shared` is that layer (MEDS I/O, coding profiles, synthetic EHRs, records, timelines, token counts, the LLM
gateway, cohort-run outputs); it never imports the VISTA system, which is the rest: the MEDS Graph and its store
(`graph`), the TOA timeline (`toa`), tumor-board displays (`display`), cited questions (`query`), the per-patient
pipeline (`pipeline`), the RAG baseline (`rag`), LLM-judge evaluation (`evaluation`), patient search
(`patient_search`) and the `vista` command (`cli`). Nothing in `vista` imports `trajonco`, `baselines`, `benchmarks`
or `jobs`.
"""
