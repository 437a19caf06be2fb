#!/usr/bin/env python3
"""Writes validation/cases/llm-foundry-a100.json from ../shared/data/published/llm-foundry-a100.

One case per row of the README's A100 tables (164 MPT runs under Composer + PyTorch FSDP1), each
carrying the row's published throughput and global batch (step time = GlobalBatchSize(T) /
Throughput(T/s)) and its source row; pairs are rows that differ in one knob only (activation
checkpointing, or the GPU count at the same per-GPU batch). The output is committed; the data
test tests/data/test_validation_suite.cpp checks it against the CSV, so it cannot drift.

    python3 validation/tools/make_llm_foundry_cases.py   (from the repository root)
"""
import csv
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CSV = os.path.join(ROOT, "..", "shared", "data", "published", "llm-foundry-a100", "throughput_a100.csv")
OUT = os.path.join(ROOT, "validation", "cases", "llm-foundry-a100.json")
PROFILES = {"a100_80gb": "configs/hardware/a100-sxm-8x.json", "a100_40gb": "configs/hardware/a100-sxm4-40gb-8x.json"}

ASSUMPTIONS = [
    "Composer driving PyTorch FSDP1 (2023): every MPTBlock an FSDP unit plus the root; sharding, mixed precision and "
    "activation checkpointing (non-reentrant, every block) as the row states; limit_all_gathers true (the yamls); "
    "backward_prefetch BACKWARD_POST and forward_prefetch false (Composer's FSDPConfig defaults; the source does not state them)",
    "PURE mixed precision = param, reduce and buffer dtype bf16 (Composer); the sharded parameters and AdamW "
    "(decoupled) state stay fp32; gradient clipping by norm is not modelled",
    "MPT as the yamls build it with MPTConfig's 2023 defaults: learned positions, biases, LayerNorm, GELU, tied "
    "embeddings, Triton FlashAttention (attn_impl triton, submit_benchmarks.py's default, which sweep.sh never overrides): "
    "attention flash_triton; the row's NumParams equals the preset's parameter count",
    "inter-node: 1600 Gb/s RoCE per node (8 x 200 Gb/s), modelled by the A100 profile's inter-node scope, fitted "
    "from the 2x8 A100-SXM4-40GB OCI RDMA all_reduce log (the same 8 x 200 Gb/s class of network)",
]


def main():
    with open(CSV, newline="") as f:
        rows = list(csv.DictReader(f))
    cases, keys = [], {}
    for i, r in enumerate(rows, start=1):
        model = r["Model"]
        seq, gpus = int(r["SeqLen (T)"]), int(r["# GPUs"])
        mb, ga = int(r["MicroBatchSize"]), int(r["GradAccum"])
        gpu = r["GPU"]
        ac = r["Activation Checkpointing"] == "True"
        assert r["Precision"] == "bf16" and r["MP Mode"] in ("PURE", "DEFAULT"), r
        assert r["Activation CPUOffload"] == "False", r
        reduce = "bf16" if r["MP Mode"] == "PURE" else "fp32"
        name = f"llmf-{gpu.replace('_', '-')}-r{i:03d}-mpt-{model}-s{seq}-g{gpus}-mb{mb}-ga{ga}{'-ac' if ac else ''}"
        gpn = min(8, gpus)
        case = {
            "name": name,
            "description": f"MPT-{model}, seq {seq}, {gpus}x {gpu}, micro-batch {mb} x grad accum {ga}, "
                           f"{r['MP Mode']}, {r['Sharding Strategy']}, AC {'on' if ac else 'off'}",
            "experiment": {
                "workload": {"preset": f"mpt-{model}", "seq_len": seq, "micro_batch": mb, "dtype": "bf16",
                             "activation_checkpointing": "full" if ac else "none"},
                "cluster": {"profile": PROFILES[gpu], "nodes": gpus // gpn, "gpus_per_node": gpn},
                "strategy": {"framework": "fsdp1", "sharding": r["Sharding Strategy"].lower(), "wrap": "block",
                             "backward_prefetch": "backward_post", "forward_prefetch": False,
                             "limit_all_gathers": True, "mixed_precision": {"param": "bf16", "reduce": reduce}},
                "training": {"grad_accum": ga, "optimizer": "adamw", "master_dtype": "fp32"},
            },
            "measured": {"published": {"tokens_per_s": float(r["Throughput (T/s)"]),
                                       "global_batch_tokens": float(r["GlobalBatchSize (T)"])}},
            "provenance": {"repository": "mosaicml/llm-foundry", "commit": "c6cfb4284",
                           "path": "scripts/train/benchmarking/README.md",
                           "row": f"{r['Section']}: data row {i} of throughput_a100.csv (MFU {r['MFU']} %)"},
            "assumptions": ASSUMPTIONS,
        }
        assert int(r["GlobalBatchSize"]) == mb * ga * gpus, r
        cases.append(case)
        keys[name] = (gpu, model, seq, mb, ga, r["MP Mode"], r["Sharding Strategy"], ac, gpus)
    pairs = []
    names = list(keys)
    for a in names:
        for b in names:
            ka, kb = keys[a], keys[b]
            diff = [k for k in range(len(ka)) if ka[k] != kb[k]]
            if diff == [7] and ka[7] and not kb[7]:
                pairs.append({"name": f"{a} -> AC off", "first": a, "second": b, "knob": "activation checkpointing on -> off"})
            if diff == [8] and ka[8] < kb[8] and not any(
                    keys[c][:8] == ka[:8] and ka[8] < keys[c][8] < kb[8] for c in names):
                pairs.append({"name": f"{a} -> {kb[8]} GPUs", "first": a, "second": b,
                              "knob": f"GPUs {ka[8]} -> {kb[8]} (same per-GPU batch)"})
    doc = {
        "schema": "stepsim.validation-cases/1",
        "source": "llm-foundry-a100",
        "description": "mosaicml/llm-foundry's published A100 throughput tables (scripts/train/benchmarking/README.md "
                       "@ c6cfb4284): 164 MPT training runs, 8-512 A100 40GB/80GB, Composer + FSDP1. Generated by "
                       "validation/tools/make_llm_foundry_cases.py from ../shared/data/published/llm-foundry-a100/"
                       "throughput_a100.csv; do not edit by hand.",
        "cases": cases,
        "pairs": pairs,
    }
    with open(OUT, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print(f"wrote {OUT}: {len(cases)} cases, {len(pairs)} pairs", file=sys.stderr)


if __name__ == "__main__":
    main()
