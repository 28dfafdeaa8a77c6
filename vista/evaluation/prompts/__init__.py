"""Prompt texts of the evaluation (package data)."""
