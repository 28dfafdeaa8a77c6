"""MEDS dataset reading, validation and writing, streamed shard by shard with pyarrow."""
