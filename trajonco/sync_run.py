"""`run_sync`: run a patient's async assessment from synchronous code, with a gateway of its own.

Scripts and the CLI assess one patient at a time without an event loop of their own:
``run_sync(run_patient, record, catalog, config, llm=...)`` (or ``run_sync(run_any_cancer, ...)``) opens an
`LLMGateway` for ``llm`` on a fresh loop, awaits the pipeline with it, and closes the gateway (its HTTP client and
any embedded model) when the work ends or raises. `run_with_gateway` does the same for any async work:

>>> from vista.shared.llm import LLMConfig
>>> from vista.shared.testing.scripted import ScriptedBackend
>>> async def model_name(gateway: LLMGateway) -> str:
...     return gateway.config.model
>>> run_with_gateway(model_name, llm=LLMConfig(model="m"), backend=ScriptedBackend([]))
'm'
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Protocol, TypeVar

from trajonco.pipeline_config import PipelineConfig
from vista.shared.llm import LLMConfig, LLMGateway, open_gateway
from vista.shared.llm.backend import Backend
from vista.shared.llm.caller import LLMCaller
from vista.shared.records import CodeCatalog, PatientRecord

T = TypeVar("T")
R_co = TypeVar("R_co", covariant=True)


class PatientPipeline(Protocol[R_co]):
    """One patient's async assessment through a gateway: `trajonco.pipeline.run_patient`, `trajonco.any_cancer.run_any_cancer`."""

    def __call__(self, record: PatientRecord, catalog: CodeCatalog, gateway: LLMCaller, config: PipelineConfig = ...,
                 *, prediction_time: datetime | None = None) -> Awaitable[R_co]: ...


def run_with_gateway(work: Callable[[LLMGateway], Awaitable[T]], *, llm: LLMConfig | None = None,
                     backend: Backend | None = None) -> T:
    """``work(gateway)`` on its own event loop, with a gateway for ``llm`` (default: the embedded model) that is
    closed afterwards; ``backend`` replaces the one ``llm`` describes (a `vista.shared.testing.scripted.ScriptedBackend` in tests)."""

    async def run() -> T:
        async with open_gateway(llm, backend=backend) as gateway:
            return await work(gateway)

    return asyncio.run(run())


def run_sync(pipeline: PatientPipeline[T], record: PatientRecord, catalog: CodeCatalog,
             config: PipelineConfig = PipelineConfig(), *, llm: LLMConfig | None = None, backend: Backend | None = None,
             prediction_time: datetime | None = None) -> T:
    """``pipeline`` for one patient from synchronous code, through a gateway of its own (`run_with_gateway`)."""
    return run_with_gateway(lambda gateway: pipeline(record, catalog, gateway, config, prediction_time=prediction_time),
                            llm=llm, backend=backend)
