#!/usr/bin/env bash
# Regenerates the fitted hardware profiles from the measurements in ../shared/data with
# `stepsim fit`. Each output records this command and its inputs under "provenance".
#   usage: tools/fit_profiles.sh [path/to/stepsim] [outdir]   (run from the repository root)
set -euo pipefail
STEPSIM=${1:-build/tools/stepsim}
OUT=${2:-configs/hardware}
D=../shared/data
N=$D/nccl-tests

# H100: intra-node from XLA's measured 8xH100 collective table (groups 1x8, 2x4, 4x2) and GEMM
# table (sm_90); inter-node from the 2x8 H100 InfiniBand all_reduce log (Nebius). The GCP
# TCPX/TCPXO logs are a different (TCP) fabric and are not mixed in.
"$STEPSIM" fit --base configs/hardware/h100-sxm-8x.json \
  --xla-collectives $D/xla_perf_tables/collective_perf_table.csv \
  --xla-gemm $D/xla_perf_tables/matmul_perf_table.csv --xla-device sm_90 \
  --nccl-tests $N/allreduce_2x8xH100_Nebius-IB_dstack.txt \
  --out "$OUT/h100-sxm-8x.json"

# A100: intra-node from the 1x8 A100-SXM4 all_reduce log (Galvatron fixture) and the DGX A100
# 4-GPU NVLink run (run 1 of the LLM-Insights file); inter-node from the 2x8 A100 OCI RDMA log.
"$STEPSIM" fit --base configs/hardware/a100-sxm-8x.json \
  --nccl-tests $N/allreduce_1x8xA100-SXM4-40GB_Galvatron-test-fixture.txt \
               "$N/allreduce_4xA100-DGX_4xH100-DGX_NVLink-vs-noP2P_LLM-Insights.txt@1" \
               $N/allreduce_2x8xA100-SXM4-40GB_OCI-RoCE.txt \
  --out "$OUT/a100-sxm-8x.json"

# A800: the same A100 logs (no A800 nccl-tests log exists in ../shared/data). A800 NVLink is
# 400 GB/s against A100's 600 GB/s, so the intra-node numbers are an upper bound for A800.
"$STEPSIM" fit --base configs/hardware/a800-sxm-8x.json \
  --nccl-tests $N/allreduce_1x8xA100-SXM4-40GB_Galvatron-test-fixture.txt \
               "$N/allreduce_4xA100-DGX_4xH100-DGX_NVLink-vs-noP2P_LLM-Insights.txt@1" \
               $N/allreduce_2x8xA100-SXM4-40GB_OCI-RoCE.txt \
  --note "A800 collectives are fitted from A100 logs (no A800 log in ../shared/data); A800 NVLink is 400 GB/s against A100's 600 GB/s, so intra-node bandwidths here are an upper bound for A800" \
  --out "$OUT/a800-sxm-8x.json"
