"""cluster.yaml is a real Ray cluster-launcher config: Ray's own validation accepts it and rejects a typo."""

from pathlib import Path

import pytest
import yaml
from ray.autoscaler._private.util import prepare_config, validate_config

CLUSTER_YAML = Path(__file__).resolve().parents[1] / "cluster.yaml"


def _load() -> dict:
    return yaml.safe_load(CLUSTER_YAML.read_text())


def test_cluster_yaml_validates():
    validate_config(prepare_config(_load()))


def test_cluster_yaml_typo_is_rejected():
    config = _load()
    config["available_node_types"]["cpu_worker"]["max_wrokers"] = 4
    with pytest.raises(Exception, match="max_wrokers"):
        validate_config(prepare_config(config))


def test_every_node_installs_the_project():
    config = _load()
    assert any("scripts/bootstrap.sh" in cmd for cmd in config["setup_commands"])
