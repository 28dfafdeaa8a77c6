"""Job entry points (`python -m jobs.<name>`): only wiring; nothing imports `jobs`."""
