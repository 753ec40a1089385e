"""``pods/<name>/log`` served from the pod runner's log files, read with the real kubectl."""

from __future__ import annotations

PODS = '/api/v1/namespaces/default/pods'


def _pod(name: str, job: str) -> dict:
    return {'apiVersion': 'v1', 'kind': 'Pod',
            'metadata': {'name': name, 'labels': {'job-name': job}},
            'spec': {'containers': [{'name': 'worker', 'image': 'sessionops'}]}}


async def test_kubectl_logs_reads_the_pod_runner_log_of_a_pod(cluster, api, kubectl, tmp_path):
    cluster.pod_log_dir = tmp_path / 'pods'
    cluster.pod_log_dir.mkdir()
    (cluster.pod_log_dir / 'default_w-abcde.log').write_text('one\ntwo\nthree\n')
    assert (await api.post(PODS, _pod('w-abcde', 'w'))).status == 201

    assert (await kubectl('logs', 'w-abcde')).stdout == 'one\ntwo\nthree\n'
    assert (await kubectl('logs', 'w-abcde', '--tail', '2')).stdout == 'two\nthree\n'
    assert (await kubectl('logs', 'w-abcde', '--limit-bytes', '5')).stdout == 'one\nt'
    assert (await kubectl('logs', 'w-abcde', '-c', 'worker')).stdout == 'one\ntwo\nthree\n'


async def test_a_pod_without_a_log_or_a_wrong_container_is_a_clear_error(cluster, api, kubectl, tmp_path):
    cluster.pod_log_dir = tmp_path / 'pods'
    assert (await api.post(PODS, _pod('w-fghij', 'w'))).status == 201

    res = await kubectl('logs', 'w-fghij', check=False)
    assert res.returncode == 1
    assert 'container "worker" in pod "w-fghij" is waiting to start: ContainerCreating' in res.stderr
    res = await kubectl('logs', 'w-fghij', '-c', 'tools', check=False)
    assert res.returncode == 1 and 'container tools is not valid for pod w-fghij' in res.stderr
    res = await kubectl('logs', 'nope', check=False)
    assert res.returncode == 1 and 'pods "nope" not found' in res.stderr
