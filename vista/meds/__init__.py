"""MEDS dataset reading, validation and writing, streamed shard by shard with pyarrow; a cohort job's tasks
(`vista.meds.tasks`) and subject listing (`vista.meds.subjects`)."""
