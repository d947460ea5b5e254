"""`refine serve-inbox`: an OpenAI-compatible endpoint whose answers you write by hand."""

from __future__ import annotations

import argparse
import time
from pathlib import Path


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "serve-inbox", help="an OpenAI-compatible endpoint answered through files (any chat window, by hand)",
        description="Each chat request is written to DIR/NNNN-<role>.request.md; the reply you save as "
        "DIR/NNNN-<role>.answer.md is returned to the client. Point a run at it with "
        "`refine run --analyst openai --base-url http://HOST:PORT/v1 --llm-timeout 3600 --transcript FILE`.")
    p.add_argument("--dir", type=Path, required=True, metavar="DIR", help="inbox folder")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8765)
    p.add_argument("--timeout", type=float, default=3600.0, help="seconds to wait for each answer")
    p.add_argument("--model", default="inbox",
                   help="who answers (e.g. the name of the model you paste the requests into): reported as the "
                        "model of every answer, so the run records it")
    return p


def run(args) -> int:
    from refine_core.analyst.inbox import serve

    server = serve(args.dir, host=args.host, port=args.port, timeout_s=args.timeout, model=args.model)
    print(f"[inbox] serving http://{args.host}:{server.server_address[1]}/v1, requests in {args.dir}", flush=True)
    try:
        while True:
            time.sleep(3600)
    finally:
        server.shutdown()
