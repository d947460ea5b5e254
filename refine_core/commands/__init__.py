"""One module per `refine` verb: `add_parser(subparsers)` and `run(args) -> int`."""
