"""The predict job's chains in one plain asyncio process, without Ray: what its Python costs before Ray's share.

It reads the label file and the MEDS dataset as the job does (`vista.shared.meds.patient_loader.PatientLoader`), and
runs every patient's one-stage chain (`trajonco.pipeline.run_patient`, chunks of ``--chunk-tokens``) through one
`vista.shared.llm.LLMGateway` with at most ``--in-flight`` requests at once and a fresh response cache, on one event
loop. Same prompts, schemas, validation, cache writes and record rendering as the job's actors; no Ray, no shared
budget, no part files, no driver. It prints one JSON line: patients, failed patients (and the first failure), wall seconds (the
endpoint counts the calls).
`benchmarks.bench_anchor --in-process` runs it under `benchmarks.tree_cpu` beside the job and the anchor, so the
job's CPU splits into its own Python (this) and Ray's share (the rest).

    python -m benchmarks.chains_in_process --labels labels.parquet --dataset meds/ --base-url http://127.0.0.1:8000/v1
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq


async def run_chains(labels: Path, dataset: Path, base_url: str, *, in_flight: int, chunk_tokens: int,
                     context_tokens: int, cache_dir: Path) -> dict[str, float]:
    """Every labelled patient's chain, all started at once (the gateway serves the longest chains first)."""
    from trajonco.pipeline import run_patient
    from trajonco.pipeline_config import PipelineConfig
    from vista.shared.llm import LLMConfig, open_gateway
    from vista.shared.llm.remote import JobGateway
    from vista.shared.meds.patient_loader import PatientLoader
    from vista.shared.records import PatientRecord

    rows = pq.read_table(labels, columns=["subject_id", "prediction_time"]).to_pylist()
    loader = PatientLoader(str(dataset), None)
    catalog = loader.catalog()
    records = loader.load(row["subject_id"] for row in rows)
    llm = LLMConfig(backend="openai", base_url=base_url, model="synthetic", context_tokens=context_tokens,
                    max_concurrency=in_flight, cache_dir=cache_dir)
    config = PipelineConfig(chunk_tokens=chunk_tokens)
    gateway = JobGateway(open_gateway(llm, job_id="chains-in-process", per_task_usage=True))
    await gateway.discover_context_tokens()
    started = time.perf_counter()

    async def one(row: dict) -> None:
        record = records[row["subject_id"]]
        if not isinstance(record, PatientRecord):
            raise record
        await run_patient(record, catalog, gateway, config, prediction_time=row["prediction_time"])

    try:
        results = await asyncio.gather(*(one(row) for row in rows), return_exceptions=True)
    finally:
        await gateway.aclose()
    failed = [r for r in results if isinstance(r, BaseException)]
    return {"patients": len(rows), "failed": len(failed), "wall_s": round(time.perf_counter() - started, 3),
            "first_failure": repr(failed[0])[:300] if failed else None}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--labels", type=Path, required=True, help="label file (subject_id, prediction_time)")
    parser.add_argument("--dataset", type=Path, required=True, help="MEDS dataset root")
    parser.add_argument("--base-url", required=True, help="the endpoint (http://HOST:PORT/v1)")
    parser.add_argument("--in-flight", type=int, default=64, help="requests in flight at once (default 64)")
    parser.add_argument("--chunk-tokens", type=int, default=1200, help="chunk limit of the agents (default 1200)")
    parser.add_argument("--context-tokens", type=int, default=32768, help="the model's context (default 32768)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="chains_cache_") as cache_dir:
        figures = asyncio.run(run_chains(args.labels, args.dataset, args.base_url, in_flight=args.in_flight,
                                         chunk_tokens=args.chunk_tokens, context_tokens=args.context_tokens,
                                         cache_dir=Path(cache_dir)))
    print(json.dumps(figures))
    return 0 if not figures["failed"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
