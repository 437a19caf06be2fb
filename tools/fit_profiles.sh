#!/usr/bin/env bash
# Regenerates the fitted hardware profiles from the measurements in data/ with
# `stepsim fit`. Each output records this command and its inputs under "provenance".
#   usage: tools/fit_profiles.sh [path/to/stepsim] [outdir]   (run from the repository root)
set -euo pipefail
STEPSIM=${1:-build/tools/stepsim}
OUT=${2:-configs/hardware}
D=data
N=$D/nccl-tests

# H100: the topology-aware NCCL model (docs/collectives.md) from the five nccl-tests logs of one
# H100 cluster (h100-cluster01-xxrjun: 1x8, 1x4, 2x1, 10x1, 10x2 GPUs; all_reduce, all_gather,
# reduce_scatter, alltoall); the GEMM table from XLA's measured sm_90 matmul table. The XLA
# collective table and the Nebius/GCP logs are other clusters and are not mixed in. The one-node
# logs hold groups of 8 and 4, so the ring's local pass is fitted too (--local-pass).
"$STEPSIM" fit --keep-sources --model topology --local-pass --base configs/hardware/h100-sxm-8x.json \
  --xla-gemm $D/xla_perf_tables/matmul_perf_table.csv --xla-device sm_90 \
  --azure-gemm $D/azure_ai_benchmarking_guide/ND_H100_v5_results.md \
  --nccl-tests $N/h100-cluster01-xxrjun/nccl_N1_G8_cnode3-003.log $N/h100-cluster01-xxrjun/nccl_N1_G4_cnode3-003.log \
               $N/h100-cluster01-xxrjun/nccl_N2_G1_cnode3-002_cnode3-003.log \
               $N/h100-cluster01-xxrjun/nccl_N10_G1.log $N/h100-cluster01-xxrjun/nccl_N10_G2.log \
  --out "$OUT/h100-sxm-8x.json"

# A100: the topology-aware NCCL model. The NVLink level from every one-node Ampere NVSwitch log in
# data/ (as the A800's below, without its link ratio), the network level from the 2x8 A100 OCI
# RoCE all_reduce log; >= 32 MiB as for the A800. One multi-node node count cannot separate the
# network's hop latency, so fit keeps the declared scale (NCCL's own, 1) and says so.
"$STEPSIM" fit --keep-sources --model topology --collectives-only --local-pass --min-bytes 33554432 \
  --base configs/hardware/a100-sxm-8x.json \
  --nccl-tests $D/galvatron/profile_hardware__hardware_configs__sp_time_1nodes_8gpus_per_node.json \
               $N/allreduce_1x8xA100-SXM4-40GB_Galvatron-test-fixture.txt \
               "$N/allreduce_4xA100-DGX_4xH100-DGX_NVLink-vs-noP2P_LLM-Insights.txt@1" \
               $N/allreduce_2x8xA100-SXM4-40GB_OCI-RoCE.txt \
  --out "$OUT/a100-sxm-8x.json"

# A800: an A100 with 8 of its 12 NVLinks (docs/collectives.md). The topology-aware model's NVLink
# level is fitted from every one-node Ampere NVSwitch log in data/, >= 32 MiB: Galvatron's
# A100-SXM4 timings on groups of 2, 4 and 8 (the spread of group sizes that separates the ring's
# local pass from the wire), the 1x8 A100-SXM4 log and the DGX A100 4-GPU run; the NVLink
# bandwidths are then carried to 8 links (--nvlink-bandwidth-ratio 1.5). The local pass (HBM) is
# not scaled. No A800 measurement is an input: the li-plus ZeRO-1/ZeRO-2 traces are validation
# cases, the Megatron traces a held-out check (tests/data/test_topology_trace_fit.cpp). Only the
# collective model is fitted (--collectives-only): compute numbers stay the A800 profile's.
"$STEPSIM" fit --keep-sources --model topology --collectives-only --local-pass --nvlink-bandwidth-ratio 1.5 --min-bytes 33554432 \
  --base configs/hardware/a800-sxm-8x.json \
  --nccl-tests $D/galvatron/profile_hardware__hardware_configs__sp_time_1nodes_8gpus_per_node.json \
               $N/allreduce_1x8xA100-SXM4-40GB_Galvatron-test-fixture.txt \
               "$N/allreduce_4xA100-DGX_4xH100-DGX_NVLink-vs-noP2P_LLM-Insights.txt@1" \
  --note "NVLink level fitted on A100 SXM4 logs (12 NVLinks) and carried to the A800's 8 (ratio 1.5); network level not measured on A800 (declared)" \
  --out "$OUT/a800-sxm-8x.json"
