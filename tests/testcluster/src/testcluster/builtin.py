"""The resources the test API server serves: built-in kinds, CRD-defined kinds, their defaults & validation.

Only the defaults and validations that operators, kubectl, helm and our tests rely on are implemented
(see the package docstring for the list of what is not emulated).
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import ipaddress
import re
from typing import Any

from . import errors

VERBS_ALL = ('create', 'delete', 'deletecollection', 'get', 'list', 'patch', 'update', 'watch')
VERBS_CREATE_ONLY = ('create',)


@dataclasses.dataclass(frozen=True)
class ResourceDef:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    singular: str = ''
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    verbs: tuple[str, ...] = VERBS_ALL
    subresources: tuple[str, ...] = ()      # e.g. 'status', 'log', 'finalize'
    stored: bool = True                    # False for review-like kinds (SAR): answered, never stored
    custom: bool = False                   # defined by a CRD
    storage_version: str = ''              # the CRD's storage version (objects are kept once per group/plural)

    @property
    def gp(self) -> tuple[str, str]:
        return (self.group, self.plural)

    @property
    def api_version(self) -> str:
        return f'{self.group}/{self.version}' if self.group else self.version

    @property
    def list_kind(self) -> str:
        return f'{self.kind}List'

    @property
    def qualified(self) -> str:
        return errors.qualified(self.group, self.plural)

    @property
    def has_status(self) -> bool:
        return 'status' in self.subresources

    @property
    def singular_name(self) -> str:
        return self.singular or self.kind.lower()


def _r(gv: str, plural: str, kind: str, namespaced: bool = True, **kwargs: Any) -> ResourceDef:
    group, _, version = gv.rpartition('/')
    return ResourceDef(group=group, version=version, plural=plural, kind=kind, namespaced=namespaced, **kwargs)


BUILTINS: list[ResourceDef] = [
    _r('v1', 'namespaces', 'Namespace', False, short_names=('ns',), subresources=('status', 'finalize')),
    _r('v1', 'pods', 'Pod', short_names=('po',), categories=('all',), subresources=('status', 'log')),
    _r('v1', 'services', 'Service', short_names=('svc',), categories=('all',), subresources=('status',)),
    _r('v1', 'serviceaccounts', 'ServiceAccount', short_names=('sa',), subresources=('token',)),
    _r('v1', 'configmaps', 'ConfigMap', short_names=('cm',)),
    _r('v1', 'secrets', 'Secret'),
    _r('v1', 'events', 'Event', short_names=('ev',)),
    _r('v1', 'endpoints', 'Endpoints', short_names=('ep',)),
    _r('v1', 'persistentvolumeclaims', 'PersistentVolumeClaim', short_names=('pvc',), subresources=('status',)),
    _r('apps/v1', 'deployments', 'Deployment', short_names=('deploy',), categories=('all',),
       subresources=('status',)),
    _r('apps/v1', 'statefulsets', 'StatefulSet', short_names=('sts',), categories=('all',),
       subresources=('status',)),
    _r('apps/v1', 'replicasets', 'ReplicaSet', short_names=('rs',), categories=('all',), subresources=('status',)),
    _r('apps/v1', 'daemonsets', 'DaemonSet', short_names=('ds',), categories=('all',), subresources=('status',)),
    _r('batch/v1', 'jobs', 'Job', categories=('all',), subresources=('status',)),
    _r('batch/v1', 'cronjobs', 'CronJob', short_names=('cj',), categories=('all',), subresources=('status',)),
    _r('coordination.k8s.io/v1', 'leases', 'Lease'),
    _r('events.k8s.io/v1', 'events', 'Event', short_names=('ev',)),
    _r('rbac.authorization.k8s.io/v1', 'roles', 'Role'),
    _r('rbac.authorization.k8s.io/v1', 'rolebindings', 'RoleBinding'),
    _r('rbac.authorization.k8s.io/v1', 'clusterroles', 'ClusterRole', False),
    _r('rbac.authorization.k8s.io/v1', 'clusterrolebindings', 'ClusterRoleBinding', False),
    _r('admissionregistration.k8s.io/v1', 'mutatingwebhookconfigurations', 'MutatingWebhookConfiguration', False,
       categories=('api-extensions',)),
    _r('admissionregistration.k8s.io/v1', 'validatingwebhookconfigurations', 'ValidatingWebhookConfiguration',
       False, categories=('api-extensions',)),
    _r('apiextensions.k8s.io/v1', 'customresourcedefinitions', 'CustomResourceDefinition', False,
       short_names=('crd', 'crds'), categories=('api-extensions',), subresources=('status',)),
    _r('policy/v1', 'poddisruptionbudgets', 'PodDisruptionBudget', short_names=('pdb',), subresources=('status',)),
    _r('networking.k8s.io/v1', 'networkpolicies', 'NetworkPolicy', short_names=('netpol',)),
    _r('networking.k8s.io/v1', 'ingresses', 'Ingress', short_names=('ing',), subresources=('status',)),
    _r('authorization.k8s.io/v1', 'subjectaccessreviews', 'SubjectAccessReview', False,
       verbs=VERBS_CREATE_ONLY, stored=False),
    _r('authorization.k8s.io/v1', 'selfsubjectaccessreviews', 'SelfSubjectAccessReview', False,
       verbs=VERBS_CREATE_ONLY, stored=False),
]

# Groups in the order kube-apiserver lists them in discovery (core first, then the rest).
BUILTIN_GROUP_ORDER = ['', 'apps', 'events.k8s.io', 'authorization.k8s.io', 'batch', 'coordination.k8s.io',
                       'networking.k8s.io', 'policy', 'rbac.authorization.k8s.io', 'admissionregistration.k8s.io',
                       'apiextensions.k8s.io']


def defs_from_crd(crd: dict[str, Any]) -> list[ResourceDef]:
    """The served resources of an (accepted, not yet removed) CRD: one per served version."""
    spec = crd.get('spec', {})
    names = spec.get('names', {})
    versions = spec.get('versions', [])
    storage = next((v['name'] for v in versions if v.get('storage')), versions[0]['name'] if versions else '')
    result = []
    for version in versions:
        if not version.get('served', True):
            continue
        subresources = []
        if 'status' in (version.get('subresources') or {}):
            subresources.append('status')
        if 'scale' in (version.get('subresources') or {}):
            subresources.append('scale')
        result.append(ResourceDef(
            group=spec.get('group', ''), version=version['name'], plural=names.get('plural', ''),
            kind=names.get('kind', ''), namespaced=spec.get('scope') == 'Namespaced',
            singular=names.get('singular') or names.get('kind', '').lower(),
            short_names=tuple(names.get('shortNames') or ()), categories=tuple(names.get('categories') or ()),
            subresources=tuple(subresources), custom=True, storage_version=storage,
        ))
    return result


def crd_version(crd: dict[str, Any], version: str) -> dict[str, Any] | None:
    for v in crd.get('spec', {}).get('versions', []):
        if v.get('name') == version:
            return v
    return None


# ---------------------------------------------------------------------------------------------------------------
# Name validation.

_DNS1123_LABEL = re.compile(r'^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')
_DNS1123_SUBDOMAIN = re.compile(r'^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')
_DNS1035_LABEL = re.compile(r'^[a-z]([-a-z0-9]*[a-z0-9])?$')

_SUBDOMAIN_MSG = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
                  "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
                  "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
_LABEL_MSG = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
              "start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
              "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')")
_DNS1035_MSG = ("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
                "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', "
                "regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')")


def validate_name(rdef: ResourceDef, name: str) -> list[dict[str, str]]:
    if rdef.gp == ('', 'namespaces'):
        ok, msg, limit = bool(_DNS1123_LABEL.match(name)), _LABEL_MSG, 63
    elif rdef.gp == ('', 'services'):
        ok, msg, limit = bool(_DNS1035_LABEL.match(name)), _DNS1035_MSG, 63
    elif rdef.group == 'rbac.authorization.k8s.io':
        ok = name not in ('.', '..') and '/' not in name and '%' not in name
        msg, limit = 'may not contain \'/\' or \'%\'', 253
    else:
        ok, msg, limit = bool(_DNS1123_SUBDOMAIN.match(name)), _SUBDOMAIN_MSG, 253
    causes = []
    if not ok:
        causes.append(errors.invalid_value('metadata.name', name, msg))
    if len(name) > limit:
        causes.append(errors.invalid_value('metadata.name', name, f'must be no more than {limit} characters'))
    return causes


def validate_label_map(field: str, labels: Any) -> list[dict[str, str]]:
    causes = []
    if labels is None:
        return causes
    if not isinstance(labels, dict):
        return [errors.invalid_value(field, labels, 'must be a map of strings')]
    for key, value in labels.items():
        if not isinstance(value, str):
            causes.append(errors.invalid_value(f'{field}', value, 'label values must be strings'))
        elif len(value) > 63 or not re.match(r'^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$', value):
            causes.append(errors.invalid_value(f'{field}', value, "a valid label must be an empty string or "
                                               "consist of alphanumeric characters, '-', '_' or '.', and must "
                                               "start and end with an alphanumeric character"))
        name = key.split('/')[-1]
        if not re.match(r'^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$', name) or len(name) > 63:
            causes.append(errors.invalid_value(f'{field}', key, "name part must consist of alphanumeric "
                                               "characters, '-', '_' or '.', and must start and end with an "
                                               "alphanumeric character"))
    return causes


# ---------------------------------------------------------------------------------------------------------------
# Defaults (as the API server's defaulting functions and admission plugins apply them).

def _image_pull_policy(image: str) -> str:
    last = image.split('/')[-1]
    if '@' in last:
        return 'IfNotPresent'
    tag = last.split(':')[1] if ':' in last else 'latest'
    return 'Always' if tag == 'latest' else 'IfNotPresent'


def default_pod_spec(spec: dict[str, Any]) -> None:
    spec.setdefault('restartPolicy', 'Always')
    spec.setdefault('dnsPolicy', 'ClusterFirst')
    spec.setdefault('schedulerName', 'default-scheduler')
    spec.setdefault('terminationGracePeriodSeconds', 30)
    spec.setdefault('securityContext', {})
    if spec.get('serviceAccountName') is None and spec.get('serviceAccount'):
        spec['serviceAccountName'] = spec['serviceAccount']
    for key in ('containers', 'initContainers'):
        for container in spec.get(key) or []:
            if not isinstance(container, dict):
                continue
            if isinstance(container.get('image'), str):
                container.setdefault('imagePullPolicy', _image_pull_policy(container['image']))
            container.setdefault('terminationMessagePath', '/dev/termination-log')
            container.setdefault('terminationMessagePolicy', 'File')
            container.setdefault('resources', {})
            for port in container.get('ports') or []:
                if isinstance(port, dict):
                    port.setdefault('protocol', 'TCP')
            for env in container.get('env') or []:
                if isinstance(env, dict) and isinstance(env.get('valueFrom'), dict):
                    ref = env['valueFrom'].get('fieldRef')
                    if isinstance(ref, dict):
                        ref.setdefault('apiVersion', 'v1')
    for volume in spec.get('volumes') or []:
        if isinstance(volume, dict):
            for source in ('configMap', 'secret'):
                if isinstance(volume.get(source), dict):
                    volume[source].setdefault('defaultMode', 420)


def _default_template(template: Any) -> None:
    if isinstance(template, dict):
        template.setdefault('metadata', {})
        if isinstance(template.get('spec'), dict):
            default_pod_spec(template['spec'])


class Allocator:
    """ClusterIPs and NodePorts, like the service IP/port allocators."""

    def __init__(self) -> None:
        self._network = ipaddress.ip_network('10.96.0.0/12')
        self._next_ip = 10
        self._next_port = 30000

    def cluster_ip(self) -> str:
        self._next_ip += 1
        return str(self._network[self._next_ip])

    def node_port(self) -> int:
        self._next_port += 1
        return self._next_port


def apply_defaults(rdef: ResourceDef, obj: dict[str, Any], old: dict[str, Any] | None,
                   allocator: Allocator) -> None:
    """Mutate ``obj`` in place with the server-side defaults of built-in kinds."""
    meta = obj.setdefault('metadata', {})
    spec = obj.get('spec')
    gp = rdef.gp
    if gp == ('', 'namespaces'):
        meta.setdefault('labels', {})['kubernetes.io/metadata.name'] = meta.get('name', '')
        obj.setdefault('spec', {}).setdefault('finalizers', ['kubernetes'])
        obj.setdefault('status', {}).setdefault('phase', 'Active')
    elif gp == ('', 'pods') and isinstance(spec, dict):
        default_pod_spec(spec)
        spec.setdefault('serviceAccountName', 'default')
        spec.setdefault('serviceAccount', spec['serviceAccountName'])
        spec.setdefault('enableServiceLinks', True)
        spec.setdefault('preemptionPolicy', 'PreemptLowerPriority')
        spec.setdefault('priority', 0)
        obj.setdefault('status', {}).setdefault('phase', 'Pending')
        obj['status'].setdefault('qosClass', 'BestEffort')
    elif gp == ('', 'services') and isinstance(spec, dict):
        spec.setdefault('type', 'ClusterIP')
        spec.setdefault('sessionAffinity', 'None')
        if old is not None:
            for key in ('clusterIP', 'clusterIPs', 'ipFamilies', 'ipFamilyPolicy'):
                if spec.get(key) in (None, '', []) and key in old.get('spec', {}):
                    spec[key] = old['spec'][key]
        if spec['type'] != 'ExternalName':
            if not spec.get('clusterIP'):
                spec['clusterIP'] = allocator.cluster_ip()
            spec.setdefault('clusterIPs', [spec['clusterIP']])
            if spec['clusterIP'] != 'None':
                spec.setdefault('ipFamilies', ['IPv4'])
                spec.setdefault('ipFamilyPolicy', 'SingleStack')
            spec.setdefault('internalTrafficPolicy', 'Cluster')
        old_ports = {p.get('port'): p for p in (old or {}).get('spec', {}).get('ports') or [] if isinstance(p, dict)}
        for port in spec.get('ports') or []:
            if isinstance(port, dict):
                port.setdefault('protocol', 'TCP')
                port.setdefault('targetPort', port.get('port'))
                if spec['type'] in ('NodePort', 'LoadBalancer') and not port.get('nodePort'):
                    port['nodePort'] = old_ports.get(port.get('port'), {}).get('nodePort') or allocator.node_port()
        obj.setdefault('status', {}).setdefault('loadBalancer', {})
    elif gp == ('', 'secrets'):
        obj.setdefault('type', 'Opaque')
        string_data = obj.pop('stringData', None)
        if isinstance(string_data, dict):
            data = obj.setdefault('data', {}) or {}
            obj['data'] = data
            for key, value in string_data.items():
                data[key] = base64.b64encode(str(value).encode()).decode()
    elif gp == ('', 'persistentvolumeclaims') and isinstance(spec, dict):
        spec.setdefault('volumeMode', 'Filesystem')
        obj.setdefault('status', {}).setdefault('phase', 'Pending')
    elif gp == ('apps', 'deployments') and isinstance(spec, dict):
        spec.setdefault('replicas', 1)
        spec.setdefault('revisionHistoryLimit', 10)
        spec.setdefault('progressDeadlineSeconds', 600)
        strategy = spec.setdefault('strategy', {})
        strategy.setdefault('type', 'RollingUpdate')
        if strategy['type'] == 'RollingUpdate':
            rolling = strategy.setdefault('rollingUpdate', {})
            rolling.setdefault('maxSurge', '25%')
            rolling.setdefault('maxUnavailable', '25%')
        _default_template(spec.get('template'))
    elif gp == ('apps', 'statefulsets') and isinstance(spec, dict):
        spec.setdefault('replicas', 1)
        spec.setdefault('podManagementPolicy', 'OrderedReady')
        spec.setdefault('revisionHistoryLimit', 10)
        spec.setdefault('updateStrategy', {'type': 'RollingUpdate', 'rollingUpdate': {'partition': 0}})
        spec.setdefault('persistentVolumeClaimRetentionPolicy', {'whenDeleted': 'Retain', 'whenScaled': 'Retain'})
        _default_template(spec.get('template'))
    elif gp == ('apps', 'replicasets') and isinstance(spec, dict):
        spec.setdefault('replicas', 1)
        _default_template(spec.get('template'))
    elif gp == ('apps', 'daemonsets') and isinstance(spec, dict):
        spec.setdefault('revisionHistoryLimit', 10)
        spec.setdefault('updateStrategy', {'type': 'RollingUpdate',
                                           'rollingUpdate': {'maxSurge': 0, 'maxUnavailable': 1}})
        _default_template(spec.get('template'))
    elif gp == ('batch', 'jobs') and isinstance(spec, dict):
        _default_job_spec(spec, meta, old)
    elif gp == ('batch', 'cronjobs') and isinstance(spec, dict):
        spec.setdefault('concurrencyPolicy', 'Allow')
        spec.setdefault('suspend', False)
        spec.setdefault('successfulJobsHistoryLimit', 3)
        spec.setdefault('failedJobsHistoryLimit', 1)
        job_spec = (spec.get('jobTemplate') or {}).get('spec')
        if isinstance(job_spec, dict):
            job_spec.setdefault('backoffLimit', 6)
            job_spec.setdefault('completionMode', 'NonIndexed')
            job_spec.setdefault('suspend', False)
            _default_template(job_spec.get('template'))
    elif gp == ('apiextensions.k8s.io', 'customresourcedefinitions') and isinstance(spec, dict):
        names = spec.setdefault('names', {})
        if names.get('kind'):
            names.setdefault('singular', names['kind'].lower())
            names.setdefault('listKind', f"{names['kind']}List")
        spec.setdefault('conversion', {'strategy': 'None'})
        for version in spec.get('versions') or []:
            if isinstance(version, dict):
                version.setdefault('served', True)
                version.setdefault('storage', False)


def _default_job_spec(spec: dict[str, Any], meta: dict[str, Any], old: dict[str, Any] | None) -> None:
    spec.setdefault('parallelism', 1)
    if spec.get('completionMode', 'NonIndexed') == 'NonIndexed' or spec.get('completions') is not None:
        spec.setdefault('completions', 1)
    spec.setdefault('backoffLimit', 6)
    spec.setdefault('completionMode', 'NonIndexed')
    spec.setdefault('suspend', False)
    spec.setdefault('podReplacementPolicy', 'TerminatingOrFailed')
    spec.setdefault('manualSelector', None)
    if spec.get('manualSelector') is None:
        spec.pop('manualSelector')
        uid = meta.get('uid', '')
        name = meta.get('name', '')
        if old is None or 'selector' not in spec:
            spec.setdefault('selector', {'matchLabels': {'batch.kubernetes.io/controller-uid': uid}})
        template = spec.setdefault('template', {})
        if isinstance(template, dict):
            labels = template.setdefault('metadata', {}).setdefault('labels', {})
            labels.setdefault('batch.kubernetes.io/controller-uid', uid)
            labels.setdefault('batch.kubernetes.io/job-name', name)
            labels.setdefault('controller-uid', uid)
            labels.setdefault('job-name', name)
    _default_template(spec.get('template'))


# ---------------------------------------------------------------------------------------------------------------
# Validation of built-in kinds (a small, commonly relied-upon subset of the real one).

def _validate_pod_spec(spec: Any, field: str) -> list[dict[str, str]]:
    if not isinstance(spec, dict):
        return [errors.required(field)]
    causes = []
    containers = spec.get('containers')
    if not containers:
        causes.append(errors.required(f'{field}.containers'))
    for key in ('containers', 'initContainers'):
        seen = set()
        for i, container in enumerate(spec.get(key) or []):
            path = f'{field}.{key}[{i}]'
            if not isinstance(container, dict):
                causes.append(errors.invalid_value(path, container, 'must be an object'))
                continue
            name = container.get('name')
            if not name:
                causes.append(errors.required(f'{path}.name'))
            elif not _DNS1123_LABEL.match(str(name)):
                causes.append(errors.invalid_value(f'{path}.name', name, _LABEL_MSG))
            elif name in seen:
                causes.append(errors.cause(f'{path}.name', 'FieldValueDuplicate', f'Duplicate value: "{name}"'))
            seen.add(name)
            if not container.get('image') and key == 'containers':
                causes.append(errors.required(f'{path}.image'))
    policy = spec.get('restartPolicy')
    if policy not in ('Always', 'OnFailure', 'Never'):
        causes.append(errors.unsupported_value(f'{field}.restartPolicy', policy, ['Always', 'OnFailure', 'Never']))
    return causes


def _validate_selector_template(spec: dict[str, Any], kind_field: str = 'spec') -> list[dict[str, str]]:
    from .selectors import match_label_selector_object
    causes = []
    selector = spec.get('selector')
    if not isinstance(selector, dict) or not (selector.get('matchLabels') or selector.get('matchExpressions')):
        causes.append(errors.required(f'{kind_field}.selector'))
        return causes
    template = spec.get('template') or {}
    labels = (template.get('metadata') or {}).get('labels') or {}
    if not match_label_selector_object(selector, labels):
        causes.append(errors.invalid_value(f'{kind_field}.template.metadata.labels', labels,
                                           '`selector` does not match template `labels`'))
    causes.extend(_validate_pod_spec(template.get('spec'), f'{kind_field}.template.spec'))
    return causes


ANNOTATIONS_MAX = 256 * 1024
"""apimachinery's TotalAnnotationSizeLimitB."""


def validate_metadata(obj: dict[str, Any]) -> list[dict[str, str]]:
    """ObjectMeta validation, for all kinds (custom resources included)."""
    causes: list[dict[str, str]] = []
    meta = obj.get('metadata')
    if not isinstance(meta, dict):
        return [errors.invalid_value('metadata', meta, 'must be an object')]
    causes += validate_label_map('metadata.labels', meta.get('labels'))
    annotations = meta.get('annotations')
    if annotations is not None and (not isinstance(annotations, dict)
                                    or not all(isinstance(v, str) for v in annotations.values())):
        causes.append(errors.invalid_value('metadata.annotations', annotations, 'must be a map of strings'))
    elif annotations and sum(len(k.encode()) + len(v.encode()) for k, v in annotations.items()) > ANNOTATIONS_MAX:
        # ValidateAnnotationsSize: kubectl's last-applied-configuration counts too.
        causes.append(errors.cause('metadata.annotations', 'FieldValueTooLong',
                                   f'Too long: may not be more than {ANNOTATIONS_MAX} bytes'))
    finalizers = meta.get('finalizers')
    if finalizers is not None and (not isinstance(finalizers, list)
                                   or not all(isinstance(f, str) and f for f in finalizers)):
        causes.append(errors.invalid_value('metadata.finalizers', finalizers, 'must be a list of strings'))
    refs = meta.get('ownerReferences')
    if refs is not None:
        if not isinstance(refs, list):
            causes.append(errors.invalid_value('metadata.ownerReferences', refs, 'must be a list'))
        else:
            for i, ref in enumerate(refs):
                for key in ('apiVersion', 'kind', 'name', 'uid'):
                    if not isinstance(ref, dict) or not isinstance(ref.get(key), str) or not ref.get(key):
                        causes.append(errors.required(f'metadata.ownerReferences[{i}].{key}'))
    return causes


def validate(rdef: ResourceDef, obj: dict[str, Any], old: dict[str, Any] | None) -> list[dict[str, str]]:
    """Returns the causes for a 422 Invalid; empty if the object is valid."""
    causes: list[dict[str, str]] = []
    spec = obj.get('spec')
    gp = rdef.gp
    if gp == ('', 'pods'):
        causes += _validate_pod_spec(spec, 'spec')
        if old is not None and isinstance(spec, dict):
            mutable = {'activeDeadlineSeconds', 'tolerations', 'terminationGracePeriodSeconds', 'schedulingGates'}
            old_spec = {k: v for k, v in (old.get('spec') or {}).items() if k not in mutable}
            new_spec = {k: v for k, v in spec.items() if k not in mutable}
            if _strip_images(old_spec) != _strip_images(new_spec):
                causes.append(errors.forbidden_field('spec', 'pod updates may not change fields other than '
                                                     '`spec.containers[*].image`,`spec.initContainers[*].image`,'
                                                     '`spec.activeDeadlineSeconds`,`spec.tolerations` (only '
                                                     'additions to existing tolerations),'
                                                     '`spec.terminationGracePeriodSeconds` (allow it to be set '
                                                     'to 1 if it was previously negative)'))
    elif gp == ('', 'services') and isinstance(spec, dict):
        stype = spec.get('type')
        if stype not in ('ClusterIP', 'NodePort', 'LoadBalancer', 'ExternalName'):
            causes.append(errors.unsupported_value('spec.type', stype,
                                                   ['ClusterIP', 'ExternalName', 'LoadBalancer', 'NodePort']))
        if stype != 'ExternalName' and spec.get('clusterIP') != 'None' and not spec.get('ports'):
            causes.append(errors.required('spec.ports'))
        if old is not None and old.get('spec', {}).get('clusterIP') not in (None, '') \
                and spec.get('clusterIP') != old['spec']['clusterIP']:
            causes.append(errors.invalid_value('spec.clusterIPs[0]', spec.get('clusterIP'),
                                               'may not change once set'))
    elif gp == ('', 'secrets'):
        for key, value in (obj.get('data') or {}).items():
            try:
                base64.b64decode(str(value), validate=True)
            except (binascii.Error, ValueError):
                raise errors.bad_request(f'Secret in version "v1" cannot be handled as a Secret: illegal base64 '
                                         f'data at input byte 0 (key {key!r})') from None
    elif gp in (('apps', 'deployments'), ('apps', 'replicasets'), ('apps', 'statefulsets'),
                ('apps', 'daemonsets')) and isinstance(spec, dict):
        causes += _validate_selector_template(spec)
        if old is not None and (old.get('spec') or {}).get('selector') != spec.get('selector'):
            causes.append(errors.invalid_value('spec.selector', spec.get('selector'), 'field is immutable'))
    elif (gp == ('apps', 'deployments') or gp == ('batch', 'jobs')) and not isinstance(spec, dict):
        causes.append(errors.required('spec'))
    if gp == ('batch', 'jobs') and isinstance(spec, dict):
        template = spec.get('template') or {}
        causes += [c for c in _validate_pod_spec(template.get('spec'), 'spec.template.spec')
                   if not c['field'].endswith('restartPolicy')]
        policy = (template.get('spec') or {}).get('restartPolicy')
        if policy not in ('OnFailure', 'Never'):
            causes.append(errors.unsupported_value('spec.template.spec.restartPolicy', policy,
                                                   ['OnFailure', 'Never']))
        for key in ('backoffLimit', 'completions', 'parallelism'):
            value = spec.get(key)
            if value is not None and (not isinstance(value, int) or value < 0):
                causes.append(errors.invalid_value(f'spec.{key}', value,
                                                   'must be greater than or equal to 0'))
        if old is not None:
            old_spec = old.get('spec') or {}
            if old_spec.get('template') != spec.get('template') and not _template_change_allowed(old_spec, spec):
                causes.append(errors.invalid_value('spec.template', spec.get('template'), 'field is immutable'))
            if old_spec.get('selector') != spec.get('selector'):
                causes.append(errors.invalid_value('spec.selector', spec.get('selector'), 'field is immutable'))
            if old_spec.get('completions') != spec.get('completions'):
                causes.append(errors.invalid_value('spec.completions', spec.get('completions'),
                                                   'field is immutable'))
    elif gp == ('batch', 'cronjobs') and isinstance(spec, dict):
        if not spec.get('schedule'):
            causes.append(errors.required('spec.schedule'))
        job_spec = (spec.get('jobTemplate') or {}).get('spec') or {}
        policy = ((job_spec.get('template') or {}).get('spec') or {}).get('restartPolicy')
        if policy not in ('OnFailure', 'Never'):
            causes.append(errors.unsupported_value('spec.jobTemplate.spec.template.spec.restartPolicy', policy,
                                                   ['OnFailure', 'Never']))
    elif gp == ('apiextensions.k8s.io', 'customresourcedefinitions'):
        causes += validate_crd(obj, old)
    elif gp == ('rbac.authorization.k8s.io', 'rolebindings') or \
            gp == ('rbac.authorization.k8s.io', 'clusterrolebindings'):
        ref = obj.get('roleRef')
        if not isinstance(ref, dict) or not ref.get('name') or not ref.get('kind'):
            causes.append(errors.required('roleRef.name'))
        elif old is not None and old.get('roleRef') != ref:
            causes.append(errors.invalid_value('roleRef', ref, 'cannot change roleRef'))
    return causes


def _strip_images(spec: dict[str, Any]) -> dict[str, Any]:
    spec = dict(spec)
    for key in ('containers', 'initContainers'):
        spec[key] = [{k: v for k, v in c.items() if k != 'image'} if isinstance(c, dict) else c
                     for c in spec.get(key) or []]
    return spec


def _template_change_allowed(old_spec: dict[str, Any], new_spec: dict[str, Any]) -> bool:
    """A Job's pod template is immutable, except for scheduling directives of a suspended, never-started job."""
    if not (old_spec.get('suspend') and new_spec.get('suspend')):
        return False
    old_t = dict(old_spec.get('template') or {})
    new_t = dict(new_spec.get('template') or {})
    mutable = ('nodeSelector', 'tolerations', 'affinity', 'schedulingGates')
    old_t['spec'] = {k: v for k, v in (old_t.get('spec') or {}).items() if k not in mutable}
    new_t['spec'] = {k: v for k, v in (new_t.get('spec') or {}).items() if k not in mutable}
    return old_t == new_t


def validate_crd(obj: dict[str, Any], old: dict[str, Any] | None) -> list[dict[str, str]]:
    causes: list[dict[str, str]] = []
    spec = obj.get('spec') or {}
    names = spec.get('names') or {}
    group = spec.get('group')
    plural = names.get('plural')
    name = (obj.get('metadata') or {}).get('name')
    if not group:
        causes.append(errors.required('spec.group'))
    elif '.' not in group:
        causes.append(errors.invalid_value('spec.group', group, 'should be a domain with at least one dot'))
    if not plural:
        causes.append(errors.required('spec.names.plural'))
    if not names.get('kind'):
        causes.append(errors.required('spec.names.kind'))
    if plural and group and name != f'{plural}.{group}':
        causes.append(errors.invalid_value('metadata.name', name, 'must be spec.names.plural+"."+spec.group'))
    if spec.get('scope') not in ('Namespaced', 'Cluster'):
        causes.append(errors.unsupported_value('spec.scope', spec.get('scope'), ['Cluster', 'Namespaced']))
    versions = spec.get('versions') or []
    if not versions:
        causes.append(errors.required('spec.versions', 'must have exactly one version marked as storage version'))
    storage = [v for v in versions if isinstance(v, dict) and v.get('storage')]
    if versions and len(storage) != 1:
        causes.append(errors.invalid_value('spec.versions', [v.get('name') for v in storage],
                                           'must have exactly one version marked as storage version'))
    for i, version in enumerate(versions):
        if not isinstance(version, dict) or not version.get('name'):
            causes.append(errors.required(f'spec.versions[{i}].name'))
            continue
        schema = (version.get('schema') or {}).get('openAPIV3Schema')
        if not isinstance(schema, dict):
            causes.append(errors.required(f'spec.versions[{i}].schema.openAPIV3Schema', 'schemas are required'))
    if old is not None:
        old_spec = old.get('spec') or {}
        if old_spec.get('scope') != spec.get('scope'):
            causes.append(errors.invalid_value('spec.scope', spec.get('scope'), 'field is immutable'))
        if old_spec.get('group') != spec.get('group'):
            causes.append(errors.invalid_value('spec.group', spec.get('group'), 'field is immutable'))
    return causes


def crd_status(crd: dict[str, Any], now: str) -> dict[str, Any]:
    """The status the apiextensions controllers set on an accepted CRD."""
    spec = crd.get('spec') or {}
    stored = list(((crd.get('status') or {}).get('storedVersions')) or [])
    for version in spec.get('versions') or []:
        if version.get('storage') and version.get('name') not in stored:
            stored.append(version['name'])
    names = dict(spec.get('names') or {})
    return {
        'acceptedNames': names,
        'conditions': [
            {'type': 'NamesAccepted', 'status': 'True', 'reason': 'NoConflicts',
             'message': 'no conflicts found', 'lastTransitionTime': now},
            {'type': 'Established', 'status': 'True', 'reason': 'InitialNamesAccepted',
             'message': 'the initial names have been accepted', 'lastTransitionTime': now},
        ],
        'storedVersions': stored,
    }
