"""`python -m sessionops.replay [--host H] [--port P] [--dirs a:b]`.

Serves the scenarios found in SESSIONOPS_REPLAY_DIRS plus `--dirs` (both
os.pathsep-separated; `--dirs` may repeat). Prints the listening URL on one line once
ready, and exits cleanly on SIGTERM or SIGINT. Exit code 2: a scenario failed to load.
With SESSIONOPS_REPLAY_API_KEY set, chat completions require that bearer key (an
environment variable, so the key never shows in a process listing).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys

from sessionops.replay.scenarios import ScenarioError, dirs_from_env
from sessionops.replay.server import ReplayServer, scenario_summary

API_KEY_ENV = "SESSIONOPS_REPLAY_API_KEY"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m sessionops.replay",
        description="The sessionops replay model: a deterministic OpenAI chat-completions server.",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default: %(default)s)")
    parser.add_argument(
        "--port", type=int, default=8089, help="port; 0 picks a free one (default: %(default)s)"
    )
    parser.add_argument(
        "--dirs",
        action="append",
        default=[],
        help=f"scenario directories, {os.pathsep!r}-separated; added to SESSIONOPS_REPLAY_DIRS",
    )
    parser.add_argument("--log-level", default="INFO", help="logging level (default: %(default)s)")
    return parser.parse_args(argv)


async def serve(args: argparse.Namespace) -> int:
    dirs = dirs_from_env() + [d for value in args.dirs for d in value.split(os.pathsep) if d]
    try:
        server = ReplayServer(dirs=dirs, host=args.host, port=args.port,
                              api_key=os.environ.get(API_KEY_ENV) or None)
    except ScenarioError as e:
        print(f"sessionops-replay: {e}", file=sys.stderr)
        return 2
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    url = await server.start()
    try:
        print(
            f"sessionops replay model listening on {url} ({scenario_summary(server.scenarios)})", flush=True
        )
        await stop.wait()
    finally:
        await server.stop()
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(name)s %(levelname)s %(message)s")
    return asyncio.run(serve(args))


if __name__ == "__main__":
    sys.exit(main())
