"""Prompt templates of the TrajOnco agents (``string.Template`` text files, loaded by `trajonco.agents.prompts`)."""
