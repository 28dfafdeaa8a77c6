"""Prompt texts of the display generators (package data)."""
