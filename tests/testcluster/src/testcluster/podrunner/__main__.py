"""``python -m testcluster.podrunner --kubeconfig PATH --workdirs DIR [--log-dir DIR] [--python-path DIR]...``.

Runs the pod runner in the foreground until SIGTERM or SIGINT (the local stack starts
it next to the test cluster and the product it serves).
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading

from testcluster.podrunner.runner import PodRunner


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m testcluster.podrunner", description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", required=True, help="kubeconfig of the cluster whose Jobs to run")
    parser.add_argument("--workdirs", required=True, help="host directory for the pods' work volumes")
    parser.add_argument("--log-dir", help="where pod logs and podrunner.log go (default: a temporary directory)")
    parser.add_argument("--max-grace-seconds", type=float, default=5.0,
                        help="cap of terminationGracePeriodSeconds when stopping a pod (default 5)")
    parser.add_argument("--python-path", action="append", default=[], metavar="DIR",
                        help="put DIR on PYTHONPATH of containers whose interpreter is not the runner's "
                             "(another UID's); may be repeated")
    parser.add_argument("--workdir-label", metavar="LABEL",
                        help="the Job label whose value names the shared work directory (default: the Job's name)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    runner = PodRunner(args.kubeconfig, args.workdirs, log_dir=args.log_dir,
                       max_grace_seconds=args.max_grace_seconds, python_path=args.python_path,
                       workdir_label=args.workdir_label)
    with runner:
        print(f"pod runner ready; pod logs in {runner.log_dir}", flush=True)
        stop.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
