"""Event-definition profiles (TOML, package data)."""
