"""python3 -m attnsel select|list|plan ...: the attnsel command's selection subcommands, printing
the same JSON (--json) or a short explanation."""
import argparse
import json
import sys

from . import _library as L
from .plan import plan as make_plan
from .selection import _SWITCHES, select

EXIT_USAGE, EXIT_NO_BACKEND = 2, 3


def _facts(items):
    return list(items or [])


def _select(args):
    switches = {name: getattr(args, name) for name in _SWITCHES}
    per_kind = dict(item.split("=", 1) for item in args.backend_per_kind or [])
    try:
        s = select(platform=args.platform, head_size=args.head_size, dtype=args.dtype,
                   kv_cache_dtype=args.kv_cache_dtype, block_size=args.block_size, mode=args.mode,
                   facts=_facts(args.fact), attention_backend=args.attention_backend, backend_per_kind=per_kind,
                   attn_type=args.attn_type, num_heads=args.num_heads, **switches)
    except (ValueError, NotImplementedError) as e:
        if args.json:
            error_type = "ValueError" if isinstance(e, ValueError) else "NotImplementedError"
            print(json.dumps({"error": str(e), "error_type": error_type,
                              "candidates": [c.__dict__ for c in getattr(e, "candidates", [])]}, indent=2))
        for c in getattr(e, "candidates", []):
            print(f"  [{c.priority}] {'✓' if c.valid else '✗'} {c.backend}" +
                  ("" if c.valid else ": " + "; ".join(c.reasons)), file=sys.stderr)
        print(f"attnsel: error: {e}", file=sys.stderr)
        return EXIT_NO_BACKEND
    if args.json:
        out = {"backend": s.backend, "class": s.class_name, "priority": s.priority, "platform": s.platform,
               "mode": s.mode, "config": s.config._asdict(), "num_heads": s.num_heads, "requested": s.requested,
               "candidates": [c.__dict__ for c in s.candidates], "warnings": s.warnings}
        print(json.dumps(out, indent=2))
        return 0
    print(f"Platform:  {s.platform} ({s.mode} mode)")
    print("Candidates, in priority order:")
    for c in s.candidates:
        print(f"  [{c.priority}] {'✓' if c.valid else '✗'} {c.backend}" + ("" if c.valid else ": " + "; ".join(c.reasons)))
    for w in s.warnings:
        print(f"Warning:   {w}")
    priority = f", priority {s.priority}" if s.priority is not None else ""
    print(f"Chosen:    {s.backend} ({s.class_name}{priority})")
    return 0


def _list(args):
    print(json.dumps(L.call_json(L.lib.attnsel_list_backends, L.encode(args.platform), L.encode(args.mode)), indent=2))
    return 0


def _plan(args):
    try:
        p = make_plan(args.model, args.platform, mode=args.mode, facts=_facts(args.fact),
                      attention_backend=args.attention_backend, kv_cache_dtype=args.kv_cache_dtype,
                      block_size=args.block_size, dtype=args.dtype, tensor_parallel_size=args.tensor_parallel_size)
    except (ValueError, NotImplementedError) as e:
        print(f"attnsel: error: {e}", file=sys.stderr)
        return EXIT_NO_BACKEND
    print(json.dumps(p.raw, indent=2))
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python3 -m attnsel", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    def platform_options(p):
        p.add_argument("--platform", help="cuda:MAJOR.MINOR, rocm:gfxNNN, xpu, cpu or other:NAME (default: this host)")
        p.add_argument("--mode", choices=["reference", "runnable"])
        p.add_argument("--fact", action="append", metavar="NAME=VALUE")

    s = sub.add_parser("select", help="choose the attention backend for one layer, and explain the choice")
    platform_options(s)
    s.add_argument("--head-size", type=int, default=128)
    s.add_argument("--dtype", default="bfloat16")
    s.add_argument("--kv-cache-dtype")
    s.add_argument("--block-size", type=int)
    s.add_argument("--attn-type", default="decoder")
    s.add_argument("--num-heads", type=int)
    s.add_argument("--attention-backend")
    s.add_argument("--backend-per-kind", action="append", metavar="KIND=NAME")
    s.add_argument("--json", action="store_true")
    for name in _SWITCHES:
        s.add_argument(L.SELECTOR_FLAGS[name]["cli_flag"], dest=name, action="store_true",
                       help=L.SELECTOR_FLAGS[name]["help"])
    s.set_defaults(run=_select)

    lst = sub.add_parser("list", help="every registered backend with its capabilities (JSON)")
    platform_options(lst)
    lst.set_defaults(run=_list)

    p = sub.add_parser("plan", help="a whole model, layer by layer (JSON)")
    platform_options(p)
    p.add_argument("--model", help="a config.json or a folder holding one (default: a Llama-3-8B-like model)")
    p.add_argument("--attention-backend")
    p.add_argument("--kv-cache-dtype")
    p.add_argument("--block-size", type=int)
    p.add_argument("--dtype")
    p.add_argument("--tensor-parallel-size", type=int, default=1)
    p.set_defaults(run=_plan)

    args = parser.parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
