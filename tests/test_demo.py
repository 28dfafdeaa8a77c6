"""`make demo` is `jobs.report` in quick mode with the demo's agent settings; the user's options win."""

from __future__ import annotations

import jobs.demo as demo


def test_demo_runs_the_report_in_quick_mode_with_agents_on_lung(monkeypatch, capsys):
    seen: list[list[str]] = []
    monkeypatch.setattr(demo.report, "main", lambda argv: seen.append(argv) or 0)
    built: list[tuple] = []
    monkeypatch.setattr(demo, "demo_store", lambda dataset, store: built.append((dataset, store)) or ([7, 9], 0.5))
    assert demo.main(["--out", "somewhere", "--agent-variants=one_stage"]) == 0
    (argv,) = seen
    assert argv[0] == "--quick"
    assert argv.count("--out") == 1 and argv[argv.index("--out") + 1] == "somewhere"
    assert "--agent-variants=one_stage" in argv and "one_stage,two_stage" not in argv
    assert argv[argv.index("--agent-patients") + 1] == "4"
    out = capsys.readouterr().out
    assert "somewhere/report.html" in out
    assert built == [(demo.Path("somewhere/dataset"), demo.Path("somewhere/vista"))]  # the report's synthetic data
    assert "vista serve --store somewhere/vista" in out  # the demo ends with the line that opens the dashboard


def test_demo_settings_are_valid_report_settings():
    from benchmarks.report.options import settings_from_args
    from benchmarks.report_arguments import build_parser

    argv = demo.demo_argv([])
    settings = settings_from_args(build_parser().parse_args(argv), "demo")
    assert settings.quick and settings.focus_cohort == "lung" and settings.agent_patients == 4
    assert set(settings.agent_variants) == {"one_stage", "two_stage"}
