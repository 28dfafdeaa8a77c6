"""MEDS dataset reading, validation and writing, streamed shard by shard with pyarrow; a cohort job's tasks
(`vista.shared.meds.tasks`) and subject listing (`vista.shared.meds.subjects`)."""
