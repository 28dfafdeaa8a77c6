"""The tasks of a label file (`vista.shared.meds.tasks`), the subject listing (`vista.shared.meds.subjects`) and the endpoint check's
module (`vista.shared.llm.endpoint_check`): moved out of jobs/, read once, doctested."""

from __future__ import annotations

from datetime import datetime

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from meds_builders import good_dataset

T0 = datetime(2020, 1, 1)


def test_a_job_reads_its_case_control_label_file_once(tmp_path, monkeypatch):
    """On main the job read the label file for its tasks (`read_label_tasks`) and again, right after, for its
    matched groups (`read_match_groups`): two full reads of a file that can hold 100,000 rows."""
    from jobs import build_graphs

    good_dataset(tmp_path / "ds")
    labels = tmp_path / "cc.parquet"
    pq.write_table(pa.table({"subject_id": [1, 2, 3, 4], "prediction_time": [T0] * 4,
                             "boolean_value": [True, False, True, False], "matched_to": [None, 1, None, 3]}), labels)
    reads: list[str] = []
    real = pq.read_table

    def counted(source, *args, **kwargs):
        if str(source).endswith("cc.parquet"):
            reads.append(str(source))
        return real(source, *args, **kwargs)

    monkeypatch.setattr(pq, "read_table", counted)
    args = build_graphs.build_parser().parse_args(["--dataset", str(tmp_path / "ds"), "--labels", str(labels),
                                                   "--out", str(tmp_path / "out"), "--limit", "3"])
    job = build_graphs.GraphsJob(args, "r1")
    job.check()
    groups = job.match_groups()
    assert groups is not None and groups.group_of[next(iter(groups.group_of))] == 1
    assert len(reads) == 1, reads


def test_label_tasks_without_matching_have_no_groups_and_refuse_repeated_keys(tmp_path):
    from vista.shared.meds.labels import LabelFileError
    from vista.shared.meds.tasks import read_label_tasks

    plain = tmp_path / "plain.parquet"
    pq.write_table(pa.table({"subject_id": [2, 1], "prediction_time": [T0, T0]}), plain)
    tasks = read_label_tasks(plain)
    assert tasks.groups is None and tasks.table.num_rows == 2
    twice = tmp_path / "twice.parquet"
    pq.write_table(pa.table({"subject_id": [1, 1], "prediction_time": [T0, T0]}), twice)
    with pytest.raises(LabelFileError, match=r"twice\.parquet: subject 1: field 'prediction_time': 1 .* more than once"):
        read_label_tasks(twice)


def test_an_unusable_shard_is_named_before_any_listing(tmp_path):
    from vista.shared.meds.errors import MedsFileError
    from vista.shared.meds.subjects import check_listable

    good_dataset(tmp_path)
    check_listable(tmp_path)
    (tmp_path / "data/train/1.parquet").write_bytes(b"not parquet")
    with pytest.raises(MedsFileError, match=r"the subjects of 1 shard\(s\) cannot be listed: data/train/1\.parquet"):
        check_listable(tmp_path)


def _listed(dataset) -> list[int]:
    """Every subject as the whole-dataset listing gives them (the Ray tasks' function, shard by shard), sorted."""
    import pyarrow as pa

    from vista.shared.meds.reader import MedsDataset
    from vista.shared.meds.subjects import list_shard_subjects

    shards = pa.table({"shard": list(MedsDataset(dataset).shards)})
    return sorted(list_shard_subjects(shards, str(dataset)).column("subject_id").to_pylist())


def test_the_first_subjects_are_the_listings_first_and_only_the_shards_that_may_hold_them_are_read(tmp_path):
    import pyarrow.parquet as pq

    from meds_builders import meds_table, patient_rows
    from vista.shared.meds.subjects import first_subjects

    # file order is not id order; one shard's footer has no statistics (it may hold any id: always read)
    good_dataset(tmp_path, ((20, 21, 22), (4, 5), (10, 11), (6, 7, 30)), n_timed=1)
    pq.write_table(meds_table([r for sid in (8, 40) for r in patient_rows(sid, 1)]), tmp_path / "data/train/4.parquet",
                   write_statistics=False)
    every = _listed(tmp_path)
    for count in range(1, len(every) + 2):
        assert first_subjects(tmp_path, count).subject_ids == every[:count], count
    read = {count: first_subjects(tmp_path, count).shards_read for count in (2, 4, 5, 6)}
    assert read[2] == ("data/train/4.parquet", "data/train/1.parquet")  # 4, 5 (and 8): the 6..30 shard is above 5
    assert read[4] == ("data/train/4.parquet", "data/train/1.parquet", "data/train/3.parquet")  # 4 5 6 7
    assert read[5] == read[4] and read[6] == read[4] + ("data/train/2.parquet",)  # ... 8 10: the 20.. shard never


def test_the_graph_job_with_a_limit_lists_its_first_subjects_without_ray(tmp_path):
    from jobs.build_graphs import GraphsJob, build_parser
    from jobs.ray_runtime import LazyRay

    good_dataset(tmp_path / "meds", ((7, 8, 9), (1, 2, 3), (4, 5, 6)), n_timed=1)
    args = build_parser().parse_args(["--dataset", str(tmp_path / "meds"), "--out", str(tmp_path / "out"),
                                      "--stages", "graph", "--limit", "4"])
    job = GraphsJob(args, "r")
    job.check()
    ray = LazyRay(job.ray_options())
    assert [key.subject_id for key in job.task_keys(ray)] == _listed(tmp_path / "meds")[:4] == [1, 2, 3, 4]
    assert ray._thread is None and ray._runtime is None  # Ray was not started to list them
