"""Prompt texts of the query agents (package data)."""
