"""TrajOnco: cohorts, time-aware chunking, agents and the per-patient pipeline (builds on `vista`)."""
