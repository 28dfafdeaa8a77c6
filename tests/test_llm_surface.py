"""The LLM package's surface: what a pipeline may import, and one way to get a gateway.

`vista.shared.llm.__all__` is the pipelines' view (flow control stays private: `vista.shared.llm.job_flow` is the
jobs' door, guarded by import-linter), and outside the gateway's own module no code of the project builds an
`LLMGateway` itself: `open_gateway` does (tests of the gateway itself may).
"""

import ast
from pathlib import Path

import vista.shared.llm as llm
from vista.shared.llm import LLMConfig, open_gateway
from vista.shared.testing.scripted import ScriptedBackend

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("vista", "trajonco", "baselines", "jobs", "benchmarks")


def test_the_package_exports_what_a_pipeline_may_use_and_no_flow_control():
    assert sorted(llm.__all__) == [
        "CallRecord", "ErrorKind", "LLMCallFailed", "LLMCaller", "LLMConfig", "LLMGateway", "LLMResult", "Message",
        "SyncLLMGateway", "assistant", "chain_calls", "open_gateway", "system", "user",
    ]
    assert all(hasattr(llm, name) for name in llm.__all__)
    for private in ("RequestBudget", "BudgetLimits", "CircuitBreaker", "RemoteBudget", "BudgetService"):
        assert not hasattr(llm, private), private


def _constructions(path: Path) -> list[int]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    return [node.lineno for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "LLMGateway"]


def test_only_the_factory_builds_a_gateway_in_the_packages_jobs_and_benchmarks():
    found = {str(path.relative_to(ROOT)): lines
             for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py"))
             if path != ROOT / "vista/shared/llm/gateway.py" and (lines := _constructions(path))}
    assert found == {}


def test_a_job_actors_gateway_counts_usage_per_task_and_asks_the_shared_budget():
    from vista.shared.llm.job_flow import BudgetLimits
    from vista.shared.llm._budget import RequestBudget

    shared = RequestBudget(BudgetLimits(max_in_flight=2))
    plain = open_gateway(LLMConfig(model="m"), backend=ScriptedBackend([]), job_id="judge")
    job = open_gateway(LLMConfig(model="m"), backend=ScriptedBackend([]), job_id="run-1", shared_budget=shared,
                       per_task_usage=True)
    assert (plain.job_id, job.job_id) == ("judge", "run-1")
    assert shared not in plain._limiters and job._limiters[-1] is shared
    assert type(plain.ledger).__name__ == "UsageLedger" and type(job.ledger).__name__ == "NullLedger"
    assert plain._warn_unpriced and not job._warn_unpriced
