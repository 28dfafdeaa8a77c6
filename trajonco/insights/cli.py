"""``trajonco insights RUN --out DIR``: the population insights of a prediction run, as JSON and PNG figures.

`add_parser` registers the sub-command on the ``trajonco`` sub-parsers; the handler imports the analysis lazily so
``trajonco --help`` stays fast. A bad run is one line (`CommandLineError`, exit status 2).
"""

from __future__ import annotations

import argparse
from pathlib import Path


def _cmd_insights(args: argparse.Namespace) -> int:
    from trajonco.insights.analysis import compute_insights
    from trajonco.insights.errors import InsightsInputError
    from trajonco.insights.inputs import read_run
    from trajonco.insights.render import write_insights
    from trajonco.insights.results import InsightsSettings
    from vista.shared.errors import CommandLineError

    try:
        run = read_run(Path(args.run))
    except InsightsInputError as exc:
        raise CommandLineError(str(exc)) from None
    settings = InsightsSettings(seed=args.seed, n_topics=args.topics, map_method=args.map, flow_window=args.window)
    insights = compute_insights(run, settings)
    json_path, pngs = write_insights(insights, Path(args.out))
    r = insights.result
    print(f"{r.run}: {r.n.text()} -> {json_path} and {len(pngs)} figure(s) in {args.out}")
    for what, reason in (("topics", r.topics.reason), ("map", r.embedding.map_reason),
                         ("similarity", r.similarity.reason), ("map", r.embedding.notice)):
        if reason:
            print(f"  {what}: {reason}")
    return 0


def add_parser(sub) -> None:
    """Register ``insights`` on an argparse sub-parsers object."""
    from vista.shared.cli_kit import subcommand

    p = subcommand(sub, "insights", "population insights of a prediction run: topics of the extracted events, "
                   "patient map, similarity heatmap, risk transitions",
                   "trajonco insights out/predict-lung --out out/insights-lung")
    p.add_argument("run", help="a jobs.predict output folder or its predictions.parquet")
    p.add_argument("--out", required=True, help="folder for insights.json and the PNG figures")
    p.add_argument("--seed", type=int, default=0, help="seed of the topic model and the map")
    p.add_argument("--topics", type=int, default=6, help="NMF topics (2-30, fewer on small runs)")
    p.add_argument("--map", choices=("umap", "pca"), default="umap", help="2-D map method")
    p.add_argument("--window", type=int, default=4, help="chunk columns of the risk-flow figure")
    p.set_defaults(handler=_cmd_insights)
