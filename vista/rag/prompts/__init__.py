"""Prompt texts of the RAG baseline (package data)."""
