"""Prompt texts of the TOA sub-agents (package data)."""
