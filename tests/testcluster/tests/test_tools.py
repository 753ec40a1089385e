"""The real kubectl and helm binaries against the test cluster."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from binaries import binary, run
from samples import CMS, CRS, DEPLOYS, GROUP, cr, crd, deployment


def dump(*docs):
    return yaml.safe_dump_all(list(docs))


async def test_kubectl_apply_get_explain(api, kubectl):
    result = await kubectl('apply', '-f', '-', input=dump(crd()))
    assert 'customresourcedefinition.apiextensions.k8s.io/agentsessions.example.sessionops.dev created' \
        in result.stdout
    await kubectl('wait', '--for=condition=Established', f'crd/agentsessions.{GROUP}', '--timeout=10s')
    result = await kubectl('apply', '-f', '-', input=dump(cr('s1', model='m1'), deployment('web')))
    assert 'agentsession.example.sessionops.dev/s1 created' in result.stdout
    assert 'deployment.apps/web created' in result.stdout
    assert result.stderr == ''
    changed = deployment('web', image='nginx:1.26')
    result = await kubectl('apply', '-f', '-', input=dump(cr('s1', model='m2'), changed))
    assert 'configured' in result.stdout and result.stderr == ''
    obj = yaml.safe_load((await kubectl('get', 'asess', 's1', '-o', 'yaml')).stdout)
    assert obj['spec']['model'] == 'm2' and obj['metadata']['generation'] == 2
    web = json.loads((await kubectl('get', 'deploy', 'web', '-o', 'json')).stdout)
    assert web['spec']['template']['spec']['containers'][0]['image'] == 'nginx:1.26'
    result = await kubectl('explain', 'agentsessions.spec')
    assert 'The desired state of the session.' in result.stdout
    assert 'The model that runs the agent.' in result.stdout
    result = await kubectl('explain', 'deployments.spec.replicas')
    assert 'Number of desired pods' in result.stdout
    await api.patch(f'{CRS}/s1/status', {'status': {'phase': 'Running'}})
    table = (await kubectl('get', 'agentsessions')).stdout.splitlines()
    assert table[0].split() == ['NAME', 'PHASE', 'AGE'] and table[1].split()[:2] == ['s1', 'Running']
    result = await kubectl('apply', '-f', '-', input=dump({**cr('s2'), 'spec': {'model': 'm', 'bogus': 1}}),
                           check=False)
    if result.returncode != 0:   # rejected only where the schema module is installed (strict field validation)
        assert 'bogus' in result.stderr


async def test_kubectl_patch_and_delete(api, kubectl):
    await api.post(DEPLOYS, deployment('web'))
    await kubectl('patch', 'deployment', 'web', '--type=merge', '-p', '{"spec":{"replicas":3}}')
    await kubectl('patch', 'deployment', 'web', '--type=json', '-p',
                  '[{"op":"add","path":"/metadata/labels","value":{"a":"b"}}]')
    await kubectl('patch', 'deployment', 'web', '--type=strategic', '-p',
                  '{"spec":{"template":{"spec":{"containers":[{"name":"web","env":[{"name":"B","value":"2"}]}]}}}}')
    obj = (await api.get(f'{DEPLOYS}/web')).body
    assert obj['spec']['replicas'] == 3 and obj['metadata']['labels'] == {'a': 'b'}
    assert [e['name'] for e in obj['spec']['template']['spec']['containers'][0]['env']] == ['A', 'B']
    result = await kubectl('delete', 'deployment', 'web')
    assert 'deployment.apps "web" deleted' in result.stdout
    result = await kubectl('delete', 'deployment', 'web', check=False)
    assert result.stderr.strip() == 'Error from server (NotFound): deployments.apps "web" not found'


async def test_kubectl_server_side_apply(api, kubectl):
    manifest = dump({'apiVersion': 'v1', 'kind': 'ConfigMap', 'metadata': {'name': 'c', 'namespace': 'default'},
                     'data': {'a': '1', 'b': '2'}})
    result = await kubectl('apply', '--server-side', '-f', '-', input=manifest)
    assert 'configmap/c serverside-applied' in result.stdout
    rv = (await api.get(f'{CMS}/c')).body['metadata']['resourceVersion']
    await kubectl('apply', '--server-side', '-f', '-', input=manifest)
    assert (await api.get(f'{CMS}/c')).body['metadata']['resourceVersion'] == rv
    await kubectl('apply', '--server-side', '-f', '-', input=manifest.replace("  b: '2'\n", ''))
    obj = (await api.get(f'{CMS}/c')).body
    assert obj['data'] == {'a': '1'}
    assert [m['manager'] for m in obj['metadata']['managedFields']] == ['kubectl']


async def test_kubectl_typed_clients_send_protobuf(api, kubectl):
    await kubectl('create', 'namespace', 'proto')
    await kubectl('create', 'configmap', 'c', '-n', 'proto', '--from-literal=k=v')
    await kubectl('create', 'secret', 'generic', 's', '-n', 'proto', '--from-literal=k=v')
    await kubectl('create', 'job', 'j', '-n', 'proto', '--image=busybox:1.36')
    assert (await api.get('/api/v1/namespaces/proto/configmaps/c')).body['data'] == {'k': 'v'}
    assert (await api.get('/api/v1/namespaces/proto/secrets/s')).body['data'] == {'k': 'dg=='}
    job = (await api.get('/apis/batch/v1/namespaces/proto/jobs/j')).body
    assert job['spec']['template']['spec']['containers'][0]['image'] == 'busybox:1.36'
    assert job['spec']['template']['spec']['restartPolicy'] == 'Never'


async def test_kubectl_discovery_falls_back_from_aggregated(kubectl):
    result = await kubectl('api-resources', '-v=6')
    assert 'deployments' in result.stdout and 'customresourcedefinitions' in result.stdout
    assert 'apidiscovery' not in result.stdout
    assert 'E1' not in result.stderr and 'couldn\'t get' not in result.stderr


CHART = {
    'Chart.yaml': 'apiVersion: v2\nname: tiny\nversion: 0.1.0\n',
    'values.yaml': 'greeting: hello\nreplicas: 1\n',
    'templates/all.yaml': '''apiVersion: v1
kind: ConfigMap
metadata: {name: {{ .Release.Name }}-cfg}
data: {greeting: {{ .Values.greeting | quote }}}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: {{ .Release.Name }}-sa}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: {{ .Release.Name }}-web}
spec:
  replicas: {{ .Values.replicas }}
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      serviceAccountName: {{ .Release.Name }}-sa
      containers:
      - name: web
        image: nginx:1.25
        ports: [{containerPort: 80}]
---
apiVersion: v1
kind: Service
metadata: {name: {{ .Release.Name }}-svc}
spec:
  selector: {app: web}
  ports: [{port: 80, targetPort: 80}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: {{ .Release.Name }}-role}
rules: [{apiGroups: [""], resources: [configmaps], verbs: [get]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: {{ .Release.Name }}-rb}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: {{ .Release.Name }}-role}
subjects: [{kind: ServiceAccount, name: {{ .Release.Name }}-sa, namespace: {{ .Release.Namespace }}}]
''',
}


async def test_helm_install_upgrade_uninstall(cluster, api, tmp_path: Path):
    chart = tmp_path / 'chart'
    for name, text in CHART.items():
        (chart / name).parent.mkdir(parents=True, exist_ok=True)
        (chart / name).write_text(text)
    env = {f'HELM_{kind}_HOME': str(tmp_path / 'helm' / kind.lower()) for kind in ('CACHE', 'CONFIG', 'DATA')}

    async def helm(*args):
        return await run(binary('helm'), '--kubeconfig', str(cluster.kubeconfig), *args, env=env)

    await helm('install', 'rel', str(chart))
    base = '/api/v1/namespaces/default'
    assert (await api.get(f'{base}/configmaps/rel-cfg')).body['data'] == {'greeting': 'hello'}
    for path in (f'{base}/serviceaccounts/rel-sa', f'{base}/services/rel-svc', f'{DEPLOYS}/rel-web',
                 '/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles/rel-role',
                 '/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings/rel-rb'):
        assert (await api.get(path)).status == 200, path
    await helm('upgrade', 'rel', str(chart), '--set', 'greeting=bye', '--set', 'replicas=2')
    assert (await api.get(f'{base}/configmaps/rel-cfg')).body['data'] == {'greeting': 'bye'}
    assert (await api.get(f'{DEPLOYS}/rel-web')).body['spec']['replicas'] == 2
    result = await helm('list', '-o', 'json')
    assert json.loads(result.stdout)[0]['revision'] == '2'
    await helm('uninstall', 'rel')
    assert (await api.get(f'{base}/configmaps/rel-cfg')).status == 404
    assert (await api.get(f'{DEPLOYS}/rel-web')).status == 404
    secrets = (await api.get(f'{base}/secrets', params={'labelSelector': 'owner=helm'})).body['items']
    assert secrets == []
