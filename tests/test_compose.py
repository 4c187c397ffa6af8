"""docker-compose.yml must agree with the code it runs. No Docker here: the file is read, and every
module, app, queue, setting and Dockerfile it names is checked against the repository."""

from __future__ import annotations

import ast
import re
import shlex
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
SERVICES = {"postgres", "redis", "minio", "minio-init", "web", "worker", "beat", "ray-head", "ray-worker-gpu"}


@pytest.fixture(scope="module")
def services() -> dict[str, Any]:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    found: dict[str, Any] = compose["services"]
    return found


def argv(service: dict[str, Any]) -> list[str]:
    command = service.get("command", [])
    return shlex.split(command) if isinstance(command, str) else [str(arg) for arg in command]


def option(args: list[str], name: str) -> str:
    """The value of `--name=value`, `--name value` or `-Q value` in args."""
    for i, arg in enumerate(args):
        if arg.startswith(f"{name}="):
            return arg.split("=", 1)[1]
        if arg == name:
            return args[i + 1]
    raise AssertionError(f"{name} not in {args}")


def env_default(value: str) -> str:
    """`${VAR:-default}` → default; a plain value is returned as is."""
    match = re.fullmatch(r"\$\{\w+:-(.*)\}", value)
    return match.group(1) if match else value


def assigned_names(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        names |= {t.id for t in targets if isinstance(t, ast.Name)}
    return names


def settings_default(name: str) -> str:
    """The literal default of `env_str("NAME", "default")` in controlplane/settings.py."""
    for node in ast.walk(ast.parse((ROOT / "controlplane" / "settings.py").read_text())):
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            if node.args[0].value == name:
                return str(ast.literal_eval(node.args[1]))
    raise AssertionError(f"settings.py does not read {name}")


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    found: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    return found


def test_services_and_dependencies(services):
    assert services.keys() >= SERVICES
    for name, service in services.items():
        assert set(service.get("depends_on", {})) <= services.keys(), name


def test_web_runs_the_asgi_application(services):
    args = argv(services["web"])
    target = next(arg for arg in args if ":" in arg and not arg.startswith("-"))
    module, attr = target.split(":")
    assert attr in assigned_names(ROOT / f"{module.replace('.', '/')}.py")
    assert option(args, "--host") not in {"127.0.0.1", "localhost"}  # reached from other containers


def test_migrations_run_before_the_control_plane(services):
    assert (ROOT / "manage.py").is_file()
    assert argv(services["migrate"])[-3:] == ["manage.py", "migrate", "--noinput"]
    for name in ("web", "worker", "beat"):
        assert services[name]["depends_on"]["migrate"]["condition"] == "service_completed_successfully"


def test_celery_app_and_queue(services):
    worker, beat = argv(services["worker"]), argv(services["beat"])
    assert worker[:2] == ["celery", "-A"] and beat[:2] == ["celery", "-A"]
    app = option(worker, "-A")
    assert option(beat, "-A") == app
    assert "app" in assigned_names(ROOT / app / "celery.py")
    assert option(worker, "-Q") == settings_default("BARREL_CELERY_QUEUE")


def test_ray_cluster_addresses(services):
    head, gpu = argv(services["ray-head"]), argv(services["ray-worker-gpu"])
    assert option(gpu, "--address") == f"ray-head:{option(head, '--port')}"
    assert option(head, "--port") != "6379"  # Redis's port
    ray_address = urlparse(services["worker"]["environment"]["BARREL_RAY_ADDRESS"])
    assert (ray_address.hostname, str(ray_address.port)) == ("ray-head", option(head, "--dashboard-port"))
    gpu_devices = services["ray-worker-gpu"]["deploy"]["resources"]["reservations"]["devices"]
    assert any(d["driver"] == "nvidia" and "gpu" in d["capabilities"] for d in gpu_devices)
    assert "gpu" in services["ray-worker-gpu"]["build"]["args"]["EXTRAS"].split(",")


def test_environment_matches_settings(services):
    source = (ROOT / "controlplane" / "settings.py").read_text()
    for name in ("web", "worker", "beat"):
        env = services[name]["environment"]
        assert {"DATABASE_URL", "REDIS_URL", "BARREL_SECRET_KEY"} <= env.keys()
        for key in env:
            if key.startswith("BARREL_"):
                assert f'"{key}"' in source, f"{name} sets {key}, which settings.py never reads"
        assert env["BARREL_SECRET_KEY"].startswith("${BARREL_SECRET_KEY:?")
        public = urlparse(env["BARREL_PUBLIC_URL"])
        assert public.hostname == "web" and str(public.port) in argv(services["web"])
        assert "web" in env_default(env["BARREL_ALLOWED_HOSTS"]).split(",")


def test_builds_name_existing_dockerfiles_stages_and_args(services):
    for name, service in services.items():
        build = service.get("build")
        if build is None:
            continue
        context = ROOT / build.get("context", ".")
        dockerfile = context / build.get("dockerfile", "Dockerfile")
        assert dockerfile.is_file(), name
        text = dockerfile.read_text()
        if "target" in build:
            assert re.search(rf"^FROM \S+ AS {re.escape(build['target'])}$", text, re.M | re.I), name
        for arg in build.get("args", {}):
            assert re.search(rf"^ARG {arg}\b", text, re.M), f"{name}: ARG {arg}"
        for source in re.findall(r"^COPY (?!--from)(.+) \S+$", text, re.M):
            for path in source.split():
                assert "*" in path or (context / path).exists(), f"{name}: COPY {path}"


def test_the_web_server_stores_artifacts_in_minio(services, compose):
    web, minio, init = services["web"], services["minio"], services["minio-init"]
    env = web["environment"]
    # Settings takes the S3 branch with these (test_environment_matches_settings: it reads them).
    endpoint = urlparse(env["BARREL_ARTIFACTS_S3_ENDPOINT_URL"])
    assert endpoint.hostname == "minio"
    assert option(argv(minio), "--address") == f":{endpoint.port}"
    credentials = minio["environment"]
    assert env_default(env["BARREL_ARTIFACTS_S3_ACCESS_KEY_ID"]) == env_default(credentials["MINIO_ROOT_USER"])
    assert env_default(env["BARREL_ARTIFACTS_S3_SECRET_ACCESS_KEY"]) == env_default(credentials["MINIO_ROOT_PASSWORD"])
    assert len(env_default(credentials["MINIO_ROOT_PASSWORD"])) >= 8  # MinIO refuses shorter ones
    # The bucket is made, at the endpoint the web server uses, before the web server starts.
    script = " ".join(argv(init))
    assert f"mb --ignore-existing barrel/{env['BARREL_ARTIFACTS_S3_BUCKET']}" in script
    assert f"barrel {env['BARREL_ARTIFACTS_S3_ENDPOINT_URL']} " in script
    assert init["environment"] == credentials
    assert init["depends_on"]["minio"]["condition"] == "service_healthy" and "healthcheck" in minio
    assert web["depends_on"]["minio-init"]["condition"] == "service_completed_successfully"
    assert web["depends_on"]["migrate"]["condition"] == "service_completed_successfully"  # still
    volume = minio["volumes"][0].split(":")
    assert volume[1] == "/data" == argv(minio)[1] and volume[0] in compose["volumes"]
