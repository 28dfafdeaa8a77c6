"""Built-in cohort definitions (TOML data files; see `trajonco.cohorts.definition`)."""
