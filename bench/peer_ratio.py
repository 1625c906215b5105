"""garden's step beside its peer's: bench/bench_loop.py's JSON against bench/bench_peer.py's.

garden's figures are a request running alone on one worker (worker CPU per call, overhead
p50), so they are set against the peer's conversation run alone, in the durability mode its
JSON heads with (``sync``: durable at every step); the peer's figures with many conversations
at once are shown beside, for CPU only, since their wall time is mostly queueing. Both CPU
figures are the client process's (the worker's, the peer's), not PostgreSQL's.

Run: python bench/peer_ratio.py LOOP_JSON PEER_JSON [--json PATH]
Standard library only, so it runs in garden's venv or the peer's.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def ratios(loop: dict, peer: dict) -> dict:
    alone = peer["alone"]
    out = {
        "peer": peer["peer"],
        "durability": peer["durability"],
        "peer_cpu_ms_per_step": alone["cpu_ms_per_step"],
        "peer_wall_ms_p50": alone["wall_ms_p50"],
        "floor_cpu_vs_langgraph": loop["floor_cpu_per_step_ms"] / alone["cpu_ms_per_step"],
        "floor_p50_vs_langgraph": loop["floor_step_p50_ms"] / alone["wall_ms_p50"],
    }
    for model in ("scripted", "openai"):
        figures = loop.get(model, {})
        if "cpu_per_call_ms" not in figures:
            continue
        out[model] = {
            "step_cpu_vs_langgraph": figures["cpu_per_call_ms"] / alone["cpu_ms_per_step"],
            "step_cpu_vs_langgraph_concurrent": figures["cpu_per_call_ms"]
            / peer["cpu_ms_per_step"],
            "overhead_p50_vs_langgraph_wall_p50": figures["overhead_p50_ms"] / alone["wall_ms_p50"],
        }
    if "scripted" in out:
        # The headline: the scripted model has no I/O at all, as the peer's node has none.
        out["step_cpu_vs_langgraph"] = out["scripted"]["step_cpu_vs_langgraph"]
        out["overhead_p50_vs_langgraph_wall_p50"] = out["scripted"][
            "overhead_p50_vs_langgraph_wall_p50"
        ]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description="garden's step ÷ LangGraph's durable step.")
    parser.add_argument("loop_json", type=Path, help="bench/bench_loop.py --json output")
    parser.add_argument("peer_json", type=Path, help="bench/bench_peer.py --json output")
    parser.add_argument("--json", type=Path, help="write the ratios here")
    args = parser.parse_args()
    loop = json.loads(args.loop_json.read_text())
    peer = json.loads(args.peer_json.read_text())
    out = ratios(loop, peer)
    alone = peer["alone"]

    print(
        f"\ngarden ({loop['workers']} worker x {loop['threads']} threads, a request alone) beside "
        f"LangGraph {peer['versions']['langgraph']} (durability={peer['durability']}, a "
        f"conversation alone: {alone['cpu_ms_per_step']:.2f} ms CPU, p50 "
        f"{alone['wall_ms_p50']:.2f} ms per step; {peer['threads']} at once: "
        f"{peer['cpu_ms_per_step']:.2f} ms CPU per step)"
    )
    print("| garden | CPU per step | p50 | CPU ÷ LangGraph's | p50 ÷ LangGraph's |")
    print("|---|---|---|---|---|")
    print(
        f"| floor step | {loop['floor_cpu_per_step_ms']:.1f} ms | "
        f"{loop['floor_step_p50_ms']:.2f} ms | {out['floor_cpu_vs_langgraph']:.2f}x | "
        f"{out['floor_p50_vs_langgraph']:.2f}x |"
    )
    for model in ("scripted", "openai"):
        if model in out:
            figures = loop[model]
            print(
                f"| loop call, {model} | {figures['cpu_per_call_ms']:.1f} ms | "
                f"{figures['overhead_p50_ms']:.2f} ms | "
                f"{out[model]['step_cpu_vs_langgraph']:.2f}x | "
                f"{out[model]['overhead_p50_vs_langgraph_wall_p50']:.2f}x |"
            )
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n")
        print(f"\nratios written to {args.json}")


if __name__ == "__main__":
    main()
