"""``python -m testcluster serve --kubeconfig PATH [--port N]``: run the test API server in the foreground.

Stops on SIGTERM/SIGINT. ``--service NS/NAME=HOST:PORT`` maps a Service reference (as used by webhook
configurations) to a local address; it may be repeated. ``--token-auth-file`` names people's bearer tokens
(kube-apiserver's format: ``token,user,uid,"group1,group2"``). The kubeconfig written is the administrator's.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import pathlib
import signal
import sys

from .server import running_cluster


def _parse_service(text: str) -> tuple[tuple[str, str], tuple[str, int]]:
    try:
        ref, address = text.split('=', 1)
        namespace, name = ref.split('/', 1)
        host, port = address.rsplit(':', 1)
        return (namespace, name), (host, int(port))
    except ValueError:
        raise argparse.ArgumentTypeError(f'expected NS/NAME=HOST:PORT, got {text!r}') from None


async def _serve(args: argparse.Namespace) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with running_cluster(port=args.port or None, host=args.host, kubeconfig=args.kubeconfig,
                               bookmark_interval=args.bookmark_interval) as cluster:
        for key, address in args.service:
            cluster.service_endpoints[key] = address
        if args.token_auth_file:
            cluster.authn.load_token_file(args.token_auth_file)
        cluster.pod_log_dir = args.pod_logs
        print(f'serving {cluster.api_url}; kubeconfig: {args.kubeconfig}', flush=True)
        await stop.wait()
        errors = list(cluster.errors)
    for error in errors:
        print(f'server error: {error!r}', file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog='python -m testcluster')
    commands = parser.add_subparsers(dest='command', required=True)
    serve = commands.add_parser('serve', help='run the test API server until SIGTERM')
    serve.add_argument('--kubeconfig', required=True, help='where to write the kubeconfig for the server')
    serve.add_argument('--port', type=int, default=0, help='TCP port (default: a random free port)')
    serve.add_argument('--host', default='127.0.0.1')
    serve.add_argument('--bookmark-interval', type=float, default=5.0, help='seconds between watch bookmarks')
    serve.add_argument('--service', type=_parse_service, action='append', default=[],
                       help='NS/NAME=HOST:PORT: where a Service reference (webhooks) resolves to')
    serve.add_argument('--token-auth-file', help='CSV of people\'s bearer tokens: token,user,uid,"groups"')
    serve.add_argument('--pod-logs', type=pathlib.Path, default=None,
                       help="the pod runner's --log-dir: served as pods/<name>/log")
    args = parser.parse_args(argv)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve(args))
    return 0


if __name__ == '__main__':
    sys.exit(main())
