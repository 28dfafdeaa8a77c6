"""What a cohort run writes and reads back, whatever the system (TrajOnco's predictions, VISTA's graphs, the
evaluation): the output lock, ``job.json`` (settings and code version), the rows as parquet part files and their
consolidation, the retry policy, the progress line and the run summary with its LLM accounting.

Part of vista's shared layer: it knows no Ray, no agent role and no VISTA stage (the jobs wire it onto Ray).
"""
