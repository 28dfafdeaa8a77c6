"""The `trajonco` CLI lists its commands with one-line descriptions."""

import subprocess
import sys

from trajonco.cli import build_parser

COMMANDS = ["synth", "validate", "cohort", "timeline", "chunk"]


def test_help_lists_every_command():
    text = build_parser().format_help()
    for name in COMMANDS:
        assert name in text


def test_console_script_help_runs():
    out = subprocess.run([sys.executable, "-m", "trajonco.cli", "--help"], capture_output=True, text=True, check=True)
    assert "synth" in out.stdout and "generate a seeded synthetic MEDS dataset" in out.stdout
