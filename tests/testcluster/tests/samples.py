"""Sample manifests shared by the test cluster's own tests."""

from __future__ import annotations

from typing import Any

GROUP = 'example.sessionops.dev'


def crd(plural: str = 'agentsessions', kind: str = 'AgentSession', *, status: bool = True,
        scope: str = 'Namespaced') -> dict[str, Any]:
    version: dict[str, Any] = {
        'name': 'v1', 'served': True, 'storage': True,
        'additionalPrinterColumns': [{'name': 'Phase', 'type': 'string', 'jsonPath': '.status.phase'}],
        'schema': {'openAPIV3Schema': {
            'type': 'object',
            'description': f'{kind} is a test resource.',
            'properties': {
                'spec': {'type': 'object', 'description': 'The desired state of the session.',
                         'properties': {
                             'model': {'type': 'string', 'description': 'The model that runs the agent.'},
                             'replicas': {'type': 'integer', 'description': 'How many workers.'},
                             'tools': {'type': 'array', 'description': 'Tools by name.',
                                       'x-kubernetes-list-type': 'map', 'x-kubernetes-list-map-keys': ['name'],
                                       'items': {'type': 'object', 'properties': {
                                           'name': {'type': 'string'}, 'url': {'type': 'string'}}}},
                         }},
                'status': {'type': 'object', 'x-kubernetes-preserve-unknown-fields': True},
            },
        }},
    }
    if status:
        version['subresources'] = {'status': {}}
    return {
        'apiVersion': 'apiextensions.k8s.io/v1', 'kind': 'CustomResourceDefinition',
        'metadata': {'name': f'{plural}.{GROUP}'},
        'spec': {'group': GROUP, 'scope': scope, 'versions': [version],
                 'names': {'plural': plural, 'singular': kind.lower(), 'kind': kind, 'shortNames': ['asess'],
                           'categories': ['sessionops']}},
    }


def cr(name: str, namespace: str = 'default', **spec: Any) -> dict[str, Any]:
    return {'apiVersion': f'{GROUP}/v1', 'kind': 'AgentSession',
            'metadata': {'name': name, 'namespace': namespace}, 'spec': spec or {'model': 'm1'}}


CRS = f'/apis/{GROUP}/v1/namespaces/default/agentsessions'
CMS = '/api/v1/namespaces/default/configmaps'
JOBS = '/apis/batch/v1/namespaces/default/jobs'
DEPLOYS = '/apis/apps/v1/namespaces/default/deployments'


def configmap(name: str, namespace: str = 'default', **data: str) -> dict[str, Any]:
    return {'apiVersion': 'v1', 'kind': 'ConfigMap', 'metadata': {'name': name, 'namespace': namespace},
            'data': data}


def job(name: str, restart_policy: str | None = 'Never') -> dict[str, Any]:
    spec: dict[str, Any] = {'containers': [{'name': 'main', 'image': 'busybox:1.36'}]}
    if restart_policy:
        spec['restartPolicy'] = restart_policy
    return {'apiVersion': 'batch/v1', 'kind': 'Job', 'metadata': {'name': name},
            'spec': {'template': {'spec': spec}}}


def deployment(name: str, image: str = 'nginx:1.25') -> dict[str, Any]:
    return {'apiVersion': 'apps/v1', 'kind': 'Deployment', 'metadata': {'name': name},
            'spec': {'selector': {'matchLabels': {'app': name}},
                     'template': {'metadata': {'labels': {'app': name}},
                                  'spec': {'containers': [{'name': 'web', 'image': image,
                                                           'env': [{'name': 'A', 'value': '1'}],
                                                           'ports': [{'containerPort': 80}]}]}}}}
