"""VISTA: the data layer — MEDS I/O, synthetic EHRs, patient records, XML timelines, graphs and the LLM gateway.

Nothing in `vista` imports `trajonco`, `baselines`, `benchmarks` or `jobs`.
"""
