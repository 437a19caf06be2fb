#!/usr/bin/env bash
# Leave-one-out check of the topology-aware collective model (issue 15) over the five nccl-tests
# logs of one H100 cluster: fit `stepsim fit --model topology` on four logs, predict the fifth
# with `stepsim collective --compare`, and print a markdown table of the errors (docs/collectives.md
# holds this script's output; tests/unit/calibrate/test_topology_fit.cpp checks the same target).
#   usage: tools/collective_loo.sh [path/to/stepsim]   (run from the repository root)
set -euo pipefail
STEPSIM=${1:-build/tools/stepsim}
C=data/nccl-tests/h100-cluster01-xxrjun
LOGS=(nccl_N1_G8_cnode3-003.log nccl_N1_G4_cnode3-003.log nccl_N2_G1_cnode3-002_cnode3-003.log nccl_N10_G1.log nccl_N10_G2.log)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
echo "| left out | collectives predicted | rows | median abs. time error | max abs. time error |"
echo "|---|---|---:|---:|---:|"
for out in "${LOGS[@]}"; do
  train=()
  for l in "${LOGS[@]}"; do [ "$l" = "$out" ] || train+=("$C/$l"); done
  "$STEPSIM" fit --model topology --collectives-only --local-pass --base configs/hardware/h100-sxm-8x.json \
    --nccl-tests "${train[@]}" --out "$TMP/loo.json" >/dev/null
  "$STEPSIM" collective --profile "$TMP/loo.json" --compare "$C/$out" > "$TMP/cmp.txt"
  kinds=$(grep '^# [a-z_]* on ' "$TMP/cmp.txt" | awk '{print $2}' | paste -sd, -)
  last=$(tail -1 "$TMP/cmp.txt")
  rows=$(echo "$last" | sed -E 's/^# ([0-9]+) rows.*/\1/')
  med=$(echo "$last" | sed -E 's/.*median absolute error ([0-9.]+%).*/\1/')
  max=$(echo "$last" | sed -E 's/.*maximum ([0-9.]+%).*/\1/')
  echo "| $out | $kinds | $rows | $med | $max |"
done
