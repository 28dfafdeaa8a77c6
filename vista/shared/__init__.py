"""The layer TrajOnco and VISTA Architect share, which never imports the VISTA system beside it.

MEDS reading and writing (`meds`), coding profiles (`coding`), the synthetic EHR generator (`synth`), patient records
(`records`), timelines (`timeline`), token counts (`tokens`), XML reading (`xml_reading`), storage URIs (`storage`),
atomic private writes (`atomic`), the LLM gateway and its budget (`llm`), what a cohort run plans, writes and reads back
(`runs`), the errors users see (`errors`), and the test servers and doubles (`testing`, for tests and benchmarks).
"""
