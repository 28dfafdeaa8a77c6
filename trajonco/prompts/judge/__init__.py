"""Prompt templates of the pairwise judge (`trajonco.judge.prompts`).

A sub-package, not files beside the agents' templates: `jobs.manifest` hashes the files directly in
``trajonco/prompts/`` to decide whether a prediction run may resume, and editing the judge's wording must not
invalidate prediction runs.
"""
