"""Population insights over a prediction run (the paper's section 2.4 and appendix B.3), offline and seeded.

From each scored, labelled patient of a ``jobs.predict`` run: topics of the final events the agents extracted
(TF-IDF + NMF, prevalence among cases vs controls), patient embeddings (TF-IDF of the events) mapped in 2-D with
UMAP (PCA with a notice when umap-learn is missing), a cosine-similarity heatmap ordered by label and cluster, and
the workers' Low/Moderate/High risk per chunk flowing into the final score band, by case/control.

Modules, one job each: `inputs` (read a run), `text` (TF-IDF), `topics`, `embeddings`, `projection` (2-D map),
`similarity`, `transitions`, `analysis` (all of them), `results` (pydantic numbers for ``results.json``),
`figures` (PNG), `render` (figures with ids/captions, writing a folder), `section` (the report section),
`cli` (``trajonco insights``).
"""

from __future__ import annotations

from vista.shared.lazy import lazy_attributes

_EXPORTS = {
    "Insights": "analysis", "compute_insights": "analysis", "InsightsInputError": "errors", "RunInputs": "inputs",
    "inputs_from_records": "inputs", "read_run": "inputs", "render_figures": "render", "write_insights": "render",
    "InsightsResult": "results", "InsightsSettings": "results", "insights_section": "section",
}
__all__ = sorted(_EXPORTS)

__getattr__ = lazy_attributes(__name__, _EXPORTS)
