"""The agents through the real gateway with a scripted backend: state passing, ids, failures, re-asks, variants."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from datetime import datetime

import pytest

from test_agents_patients import CATALOG, lung_patient
from trajonco.agents.context_fit import ContextFitError
from trajonco.agents.results import Variant
from trajonco.any_cancer import run_any_cancer
from trajonco.pipeline import PipelineConfig, run_patient
from vista.shared.llm import LLMConfig, open_gateway
from vista.shared.llm.backend import ChatRequest
from vista.shared.testing.scripted import Delayed, ScriptedBackend
from vista.shared.timeline import parse_timeline, render_timeline

PREDICTION = datetime(2021, 1, 1)
IDS = re.compile(r'id="(e\d+)"')


class Script:
    """A scripted model: one answer function per agent, every request kept with the agent it was for."""

    def __init__(self, **answers: Callable[[ChatRequest, int], object]):
        self.answers = answers
        self.seen: list[tuple[str, ChatRequest]] = []

    @staticmethod
    def agent_of(request: ChatRequest) -> str:
        name = request.response_format["json_schema"]["name"]  # type: ignore[index]
        if "WorkerOutput" in name:
            return "worker"
        if "PreprocessorOutput" in name:
            return "preprocessor"
        return "single_agent" if "<record_xml>" in request.messages[1].content else "manager"

    def __call__(self, request: ChatRequest) -> object:
        agent = self.agent_of(request)
        n = sum(1 for a, _ in self.seen if a == agent)
        self.seen.append((agent, request))
        answer = self.answers[agent](request, n)
        return answer if isinstance(answer, (str, Delayed)) else json.dumps(answer)

    def prompts(self, agent: str) -> list[tuple[str, str]]:
        return [(r.messages[0].content, r.messages[1].content) for a, r in self.seen if a == agent and len(r.messages) == 2]


def chunk_ids(request: ChatRequest) -> list[str]:
    return IDS.findall(request.messages[-1].content.split("<chunk_xml>")[-1])


def worker_answer(request: ChatRequest, n: int) -> dict:
    ids = chunk_ids(request)
    return {
        "updated_summary": f"summary after worker {n}",
        "new_events": [{"timestamp": "2019-01-01", "description": f"finding {n}", "event_ids": ids[:1]}],
        "temporal_analysis": "stable",
        "risk_reasoning": f"reason {n}",
        "risk_level": ["Low", "Moderate", "High"][n % 3],
    }


def manager_answer(score: int = 7) -> Callable[[ChatRequest, int], dict]:
    def answer(request: ChatRequest, n: int) -> dict:
        memory = request.messages[1].content
        first_id = IDS.findall(memory) or re.findall(r"\[(e\d+)", memory)
        return {"risk_evolution_summary": "rose over time", "risk_reasoning": "several findings",
                "final_events": [{"timestamp": "2019-01-01", "description": "finding 0", "event_ids": first_id[:1]}],
                "risk_score": score}
    return answer


def run(script: Script, config: PipelineConfig, record=None, *, max_concurrency: int = 4, cache_dir=None, max_reasks: int = 1,
        context_window: int = 8192, max_tokens: int = 2048):
    async def go():
        llm = LLMConfig(max_reasks=max_reasks, max_retries=0, cache_dir=cache_dir, max_concurrency=max_concurrency,
                        max_tokens=max_tokens)
        backend = ScriptedBackend(script, context_window=context_window)
        async with open_gateway(llm, backend=backend) as gateway:
            result = await run_patient(record or lung_patient(n_visits=12), CATALOG, gateway, config, prediction_time=PREDICTION)
            return result, backend
    return asyncio.run(go())


SMALL_CHUNKS = PipelineConfig(chunk_tokens=500, memory_k=2, part_numbers=True)  # tests find chunks by 'Part k of'


def test_each_worker_sees_the_previous_summary_and_the_last_k_memory_events():
    script = Script(worker=worker_answer, manager=manager_answer())
    result, _ = run(script, SMALL_CHUNKS)
    prompts = script.prompts("worker")
    assert len(prompts) == result.chunks.n_chunks >= 4
    first_system, first_user = prompts[0]
    assert "<previous_output>" not in first_user and "earliest part" in first_system
    for i, (_, user) in enumerate(prompts[1:], start=1):
        previous = json.loads(user.split("<previous_output>\n")[1].split("\n</previous_output>")[0])
        assert previous["updated_summary"] == f"summary after worker {i - 1}"
        shown = user.split("<memory_events>\n")[1].split("\n</memory_events>")[0].splitlines()
        assert [line.split(": ", 1)[1].split(" [")[0] for line in shown] == [f"finding {j}" for j in range(max(0, i - 2), i)]
    assert [step.risk_level.value for step in result.risk_trajectory] == [["Low", "Moderate", "High"][i % 3] for i in range(len(prompts))]
    assert result.memory_events == len(prompts)
    assert result.status == "ok" and result.risk_score == 7 and result.probability == 0.7


def test_the_manager_sees_the_last_worker_answer_and_the_whole_memory():
    script = Script(worker=worker_answer, manager=manager_answer())
    result, _ = run(script, SMALL_CHUNKS)
    (system, user), = script.prompts("manager")
    last = json.loads(user.split("<final_worker_output>\n")[1].split("\n</final_worker_output>")[0])
    assert last["updated_summary"] == f"summary after worker {result.chunks.n_chunks - 1}"
    memory = user.split("<memory_events>\n")[1].split("\n</memory_events>")[0].splitlines()
    assert len(memory) == result.memory_events == result.chunks.n_chunks
    assert "1 year" in system and "2021-01-01" in system


def test_events_carry_provenance_to_meds_rows():
    record = lung_patient(n_visits=12, first_row=500)
    script = Script(worker=worker_answer, manager=manager_answer())
    result, _ = run(script, SMALL_CHUNKS, record)
    (event,) = result.events
    (source,) = event.sources
    assert source.shard == record.shard and source.row == 500 + int(source.event_id[1:])


def test_unknown_event_ids_are_dropped_and_counted():
    def inventing_worker(request, n):
        answer = worker_answer(request, n)
        answer["new_events"][0]["event_ids"] = ["e999999", *chunk_ids(request)[:1]]
        return answer

    script = Script(worker=inventing_worker, manager=lambda r, n: {**manager_answer()(r, n), "final_events": [
        {"timestamp": "2019-01-01", "description": "made up", "event_ids": ["e888888"]}]})
    result, _ = run(script, SMALL_CHUNKS)
    assert result.dropped_event_ids == result.chunks.n_chunks + 1
    assert [e.sources for e in result.events] == [()]
    assert result.status == "ok"


def test_events_dated_after_the_prediction_time_are_dropped_and_counted():
    def future_worker(request, n):
        answer = worker_answer(request, n)
        answer["new_events"].append({"timestamp": "2021-01-01", "description": "as of the prediction date", "event_ids": []})
        return answer

    result, _ = run(Script(worker=future_worker, manager=manager_answer()), SMALL_CHUNKS)
    assert result.dropped_events == result.chunks.n_chunks
    assert result.memory_events == result.chunks.n_chunks  # only the dated-before events were stored


def test_an_id_from_another_chunk_is_unknown_to_this_worker():
    def cites_next_chunk(request, n):
        answer = worker_answer(request, n)
        answer["new_events"][0]["event_ids"] = ["e3"]  # e3 is in the first chunk only
        return answer

    result, _ = run(Script(worker=cites_next_chunk, manager=manager_answer()), SMALL_CHUNKS)
    assert result.dropped_event_ids == result.chunks.n_chunks - 1


def test_an_invalid_answer_is_re_asked_with_the_validation_error():
    def worker_wrong_once(request, n):
        if n == 0:
            return {**worker_answer(request, n), "risk_level": "Severe"}
        return worker_answer(request, n - 1 if len(request.messages) > 2 else n)

    script = Script(worker=worker_wrong_once, manager=manager_answer())
    result, backend = run(script, SMALL_CHUNKS)
    reask = backend.requests[1]
    assert reask.messages[-2].role == "assistant" and "Severe" in reask.messages[-2].content
    assert reask.messages[-1].role == "user" and "risk_level" in reask.messages[-1].content
    assert result.status == "ok" and result.errors == ()
    assert result.usage["worker"].attempts == result.usage["worker"].calls + 1


def test_a_failed_worker_is_recorded_and_the_chain_goes_on_from_the_last_good_answer():
    def worker_fails_on_second_chunk(request, n):
        if "Part 2 of" in request.messages[1].content:
            return "this is not JSON"
        return worker_answer(request, n)

    script = Script(worker=worker_fails_on_second_chunk, manager=manager_answer(5))
    result, _ = run(script, SMALL_CHUNKS)
    assert result.status == "partial" and result.risk_score == 5
    (error,) = result.errors
    assert (error.agent, error.chunk_index, error.kind) == ("worker", 1, "invalid_output")
    assert result.risk_trajectory[1].risk_level is None
    third = next(user for _, user in script.prompts("worker") if "Part 3 of" in user)
    assert '"updated_summary":"summary after worker 0"' in third
    assert result.usage["worker"].failed == 1


def test_every_worker_failing_skips_the_manager_and_fails_the_patient():
    script = Script(worker=lambda r, n: "{}", manager=manager_answer())
    result, _ = run(script, SMALL_CHUNKS)
    assert result.status == "failed" and result.risk_score is None and result.probability is None
    assert script.prompts("manager") == []
    assert result.errors[-1].kind == "skipped" and result.errors[-1].agent == "manager"
    assert len(result.errors) == result.chunks.n_chunks + 1


def test_a_failed_manager_fails_the_patient_with_the_error_recorded():
    script = Script(worker=worker_answer, manager=lambda r, n: {"risk_score": 11})
    result, _ = run(script, SMALL_CHUNKS)
    assert result.status == "failed" and result.risk_score is None
    assert [(e.agent, e.kind) for e in result.errors] == [("manager", "invalid_output")]
    assert result.risk_trajectory and result.summary is None


def test_the_manager_memory_is_left_truncated_when_it_does_not_fit_the_context():
    def chatty_worker(request, n):
        answer = worker_answer(request, n)
        answer["new_events"] = [{"timestamp": f"2019-01-{d + 1:02d}", "description": f"finding {n}.{d}: " + "cough and weight loss at visit " * 2,
                                 "event_ids": []} for d in range(2)]
        return answer

    config = PipelineConfig(chunk_tokens=256, context_tokens=3000, memory_k=2)
    script = Script(worker=chatty_worker, manager=manager_answer())
    result, _ = run(script, config, lung_patient(n_visits=40), max_tokens=1024)
    (_, user), = script.prompts("manager")
    shown = user.split("<memory_events>\n")[1].split("\n</memory_events>")[0].splitlines()
    assert result.truncated and 0 < len(shown) < result.memory_events
    assert f"the {result.memory_events - len(shown)} oldest events were left out" in user


def test_chunks_too_large_for_the_context_are_refused_before_any_call():
    script = Script(worker=worker_answer, manager=manager_answer())
    with pytest.raises(ContextFitError, match="subject 42: chunk_tokens=16000"):
        run(script, PipelineConfig(chunk_tokens=16_000))
    assert script.seen == []


# ---------------------------------------------------------------------------------------------- two-stage variant
def keep_labs_and_notes(request, n):
    xml = request.messages[1].content
    kept = re.findall(r'<(?:lab|note) id="(e\d+)"', xml)
    return {"relevant_event_ids": kept[:40] + ["e777777"], "rationale": "labs and notes"}


def test_two_stage_reduces_the_xml_to_kept_events_and_re_chunks_it():
    script = Script(preprocessor=keep_labs_and_notes, worker=worker_answer, manager=manager_answer())
    result, _ = run(script, PipelineConfig(variant=Variant.TWO_STAGE, chunk_tokens=500))
    stats = result.chunks
    assert stats.n_chunks_reduced is not None and 1 <= stats.n_chunks_reduced < stats.n_chunks
    assert stats.reduced_events < stats.timeline_events and stats.reduced_tokens < stats.timeline_tokens
    assert len(script.prompts("preprocessor")) == stats.n_chunks
    assert len(script.prompts("worker")) == stats.n_chunks_reduced == len(result.risk_trajectory)
    assert result.dropped_event_ids >= stats.n_chunks  # one invented id per preprocessor
    record = lung_patient(n_visits=12)
    codes = {e.event_id: e.code for e in record.events}
    for _, user in script.prompts("worker"):
        xml = user.split("<chunk_xml>\n")[1].split("\n</chunk_xml>")[0]
        timeline = parse_timeline(xml)
        assert timeline.root.subject_id == 42 and timeline.root.sex == "M"
        for block in timeline.blocks:
            for element in block.elements:
                assert element.modality.value in ("lab", "note")
                original = next(e for e in record.events if e.event_id == element.event_id)
                assert element.attribute("code") == codes[element.event_id] and original.time == block.time
    assert result.latency.preprocess > 0 and result.latency.workers > 0


def test_preprocessors_run_concurrently_through_the_gateway_limit():
    def slow_filter(request, n):
        return Delayed(0.05, json.dumps(keep_labs_and_notes(request, n)))

    script = Script(preprocessor=slow_filter, worker=worker_answer, manager=manager_answer())
    result, backend = run(script, PipelineConfig(variant=Variant.TWO_STAGE, chunk_tokens=500), max_concurrency=3)
    assert backend.max_in_flight == 3
    assert result.status == "ok"


def test_a_failed_preprocessor_keeps_its_chunk_whole():
    def fails_on_first(request, n):
        return "garbage" if "Part 1 of" in request.messages[1].content else {"relevant_event_ids": [], "rationale": "none"}

    script = Script(preprocessor=fails_on_first, worker=worker_answer, manager=manager_answer())
    result, _ = run(script, PipelineConfig(variant=Variant.TWO_STAGE, chunk_tokens=500, part_numbers=True))
    first_chunk_events = len(IDS.findall(script.prompts("preprocessor")[0][1]))
    assert result.chunks.reduced_events == first_chunk_events
    assert result.status == "partial" and [e.agent for e in result.errors] == ["preprocessor"]


# ---------------------------------------------------------------------------------------------- single agent
def test_single_agent_reads_everything_in_one_call_when_it_fits():
    script = Script(single_agent=manager_answer(4))
    result, _ = run(script, PipelineConfig(variant=Variant.SINGLE_AGENT))
    (_, user), = script.prompts("single_agent")
    assert len(IDS.findall(user)) == result.chunks.timeline_events
    assert not result.truncated and result.truncation_note is None and result.risk_score == 4
    assert result.latency.single_agent > 0 and result.risk_trajectory == ()


def test_single_agent_left_truncates_a_long_record_and_says_so():
    script = Script(single_agent=manager_answer(4))
    result, _ = run(script, PipelineConfig(variant=Variant.SINGLE_AGENT, context_tokens=2500), lung_patient(n_visits=40), max_tokens=1024)
    (system, user), = script.prompts("single_agent")
    assert result.truncated and "oldest events" in result.truncation_note
    assert "truncated_before=" in user and "left-truncated" in user
    shown = IDS.findall(user)
    assert 0 < len(shown) < result.chunks.timeline_events
    everything = render_timeline(lung_patient(n_visits=40), CATALOG, PREDICTION).event_ids()
    assert sorted(shown) == sorted(everything[-len(shown):])  # the newest events, whole timestamps


# ---------------------------------------------------------------------------------------------- any cancer, cache
def test_any_cancer_takes_the_max_over_cancers_and_names_the_strongest():
    def manager_by_cancer(request, n):
        system = request.messages[0].content
        score = 8 if "pancreatic cancer" in system else 6 if "lymphoma" in system else 3
        return manager_answer(score)(request, n)

    script = Script(worker=worker_answer, manager=manager_by_cancer)

    async def go():
        backend = ScriptedBackend(script)
        async with open_gateway(LLMConfig(max_reasks=0, max_retries=0), backend=backend) as gateway:
            return await run_any_cancer(lung_patient(n_visits=4), CATALOG, gateway,
                                        PipelineConfig(chunk_tokens=2000, any_cancer_mode="max"),
                                        prediction_time=PREDICTION)

    pooled = asyncio.run(go())
    assert pooled.risk_score == 8 and pooled.probability == 0.8 and pooled.strongest_cancer == "pancreatic"
    assert pooled.tied_cancers == ("pancreatic",) and pooled.status == "ok"
    assert set(pooled.skipped) == {"cervical", "endometrial", "ovarian"}  # a male patient
    assert len(pooled.results) == len(pooled.scores) == 12
    assert {r.cancer for r in pooled.results} == {s.cancer for s in pooled.scores}


def test_any_cancer_ties_go_to_catalog_order_and_failures_are_kept():
    def manager(request, n):
        system = request.messages[0].content
        if "liver cancer" in system:
            return {"nonsense": 1}
        return manager_answer(5)(request, n)

    script = Script(worker=worker_answer, manager=manager)

    async def go():
        async with open_gateway(LLMConfig(max_reasks=0, max_retries=0), backend=ScriptedBackend(script)) as gateway:
            return await run_any_cancer(lung_patient(n_visits=4), CATALOG, gateway,
                                        PipelineConfig(chunk_tokens=2000, any_cancer_mode="max"),
                                        prediction_time=PREDICTION)

    pooled = asyncio.run(go())
    assert pooled.risk_score == 5 and pooled.strongest_cancer == "lung" and len(pooled.tied_cancers) == 11
    assert pooled.status == "partial"
    assert next(s for s in pooled.scores if s.cancer == "liver").status == "failed"


def test_a_second_run_is_answered_entirely_from_the_cache(tmp_path):
    config = PipelineConfig(variant=Variant.TWO_STAGE, chunk_tokens=500)
    first, _ = run(Script(preprocessor=keep_labs_and_notes, worker=worker_answer, manager=manager_answer()), config, cache_dir=tmp_path)
    never = Script()  # any request would fail: no answer functions
    second, backend = run(never, config, cache_dir=tmp_path)
    assert backend.requests == []
    assert all(u.cache_hits == u.calls > 0 for u in second.usage.values())
    assert second.model_dump(exclude={"usage", "latency"}) == first.model_dump(exclude={"usage", "latency"})


def test_prompts_do_not_say_how_many_parts_the_record_has_by_default():
    script = Script(worker=worker_answer, manager=manager_answer(5))
    run(script, PipelineConfig(chunk_tokens=500, memory_k=2))
    users = [user for _, user in script.prompts("worker")]
    assert len(users) > 2
    assert not any(re.search(r"Part \d+ of \d+", user) for user in users)
    assert "The earliest part of the record" in users[0] and all("The next part" in u for u in users[1:])
