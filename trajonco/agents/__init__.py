"""The TrajOnco agents (paper §4.4, appendix B.1): worker chain with long-term memory, manager, two-stage filter, single agent.

Every agent calls the model through `vista.shared.llm.LLMGateway` (`calls.call_agent`) with a bounded pydantic answer model
(`schemas`) and prompts filled from `trajonco/prompts/*.txt` (`prompts`). `trajonco.pipeline` runs them per patient.
"""

from trajonco.agents.chain import ChainOutcome, run_chain
from trajonco.agents.display import print_result, result_json
from trajonco.agents.memory import LongTermMemory, MemoryEvent
from trajonco.agents.preprocessor import FilterOutcome, filter_and_rechunk
from trajonco.agents.prompts import PromptContext
from trajonco.agents.results import AgentError, AnyCancerResult, PatientResult, Variant
from trajonco.agents.schemas import (
    COMPACT_LIMITS,
    STANDARD_LIMITS,
    AnyCancerManagerOutput,
    ManagerOutput,
    PreprocessorOutput,
    RiskLevel,
    WorkerOutput,
)
from trajonco.agents.single_agent import SingleAgentOutcome, run_single_agent

__all__ = [
    "COMPACT_LIMITS",
    "STANDARD_LIMITS",
    "AgentError",
    "AnyCancerManagerOutput",
    "AnyCancerResult",
    "ChainOutcome",
    "FilterOutcome",
    "LongTermMemory",
    "ManagerOutput",
    "MemoryEvent",
    "PatientResult",
    "PreprocessorOutput",
    "PromptContext",
    "RiskLevel",
    "SingleAgentOutcome",
    "Variant",
    "WorkerOutput",
    "filter_and_rechunk",
    "print_result",
    "result_json",
    "run_chain",
    "run_single_agent",
]
